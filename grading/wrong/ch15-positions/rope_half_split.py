# wrong: the half split of other libraries (x[i] with x[i + d/2]) where the exercise pairs neighbours (x[2i], x[2i+1])
# caught by: test_rope
# severity: essential
# diagnosis: 前一半和后一半的特征配成了对
# %% rope
def rope(x, positions=None, base=10000.0):
    x = np.asarray(x, dtype=float)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError("d 是奇数")
    pos = np.arange(n) if positions is None else np.asarray(positions, dtype=float)
    theta = pos[:, None] * base ** (-np.arange(0, d, 2) / d)
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * np.cos(theta) - b * np.sin(theta), a * np.sin(theta) + b * np.cos(theta)], axis=-1)
