# wrong: argmax over the target axis (for each source position, its target) instead of over the sources of each
# target row: the same on square maps that are permutations, wrong shape and values when n_t != n_s
# caught by: test_read_alignment
# severity: essential
# diagnosis: 沿目标位置取了最大值
# %% read_alignment
def read_alignment(weights):
    w = np.asarray(weights, dtype=float)
    if w.ndim < 3:
        raise ValueError("weights 至少三维")
    return w.mean(axis=-3).argmax(axis=-2)
