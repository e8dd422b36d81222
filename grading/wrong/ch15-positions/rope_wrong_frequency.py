# wrong: the angular frequency base^(-i/d) (the pair's number i over d) instead of base^(-2i/d)
# caught by: test_rope
# severity: essential
# diagnosis: 角频率用成了 base^(−i/d)
# %% rope
def rope(x, positions=None, base=10000.0):
    x = np.asarray(x, dtype=float)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError("d 是奇数")
    pos = np.arange(n) if positions is None else np.asarray(positions, dtype=float)
    theta = pos[:, None] * base ** (-np.arange(d // 2) / d)
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * np.cos(theta) - x[..., 1::2] * np.sin(theta)
    out[..., 1::2] = x[..., 0::2] * np.sin(theta) + x[..., 1::2] * np.cos(theta)
    return out
