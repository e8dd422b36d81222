# wrong: the sines' signs swapped, so every pair turns clockwise by the angle (scores still depend on the offset
# only, but the rotation is not the formula's: weights trained with RoPE would not match)
# caught by: test_rope
# severity: essential
# diagnosis: 旋转方向反了
# %% rope
def rope(x, positions=None, base=10000.0):
    x = np.asarray(x, dtype=float)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError("d 是奇数")
    pos = np.arange(n) if positions is None else np.asarray(positions, dtype=float)
    theta = pos[:, None] * base ** (-np.arange(0, d, 2) / d)
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(theta) + x[..., 1::2] * np.sin(theta)
    out[..., 1::2] = -x[..., 0::2] * np.sin(theta) + x[..., 1::2] * np.cos(theta)
    return out
