# wrong: right rotation, but written into the caller's array (x is changed) and no check of an odd d
# caught by: test_rope
# severity: edge
# diagnosis: 不要在 x 上原地修改
# %% rope
def rope(x, positions=None, base=10000.0):
    n, d = x.shape[-2], x.shape[-1]
    pos = np.arange(n) if positions is None else np.asarray(positions, dtype=float)
    theta = pos[:, None] * base ** (-np.arange(0, d - 1, 2) / d)
    first, second = x[..., 0:d - 1:2].copy(), x[..., 1::2].copy()
    x[..., 0:d - 1:2] = first * np.cos(theta) - second * np.sin(theta)
    x[..., 1::2] = first * np.sin(theta) + second * np.cos(theta)
    return x
