# wrong: the heads are combined by their largest weight instead of their mean, so one confident head outvotes the
# others (the same as the mean when a single head is given or when the heads agree)
# caught by: test_read_alignment
# severity: essential
# diagnosis: 取的是各个头里最大的权重
# %% read_alignment
def read_alignment(weights):
    w = np.asarray(weights, dtype=float)
    if w.ndim < 3:
        raise ValueError("weights 至少三维")
    return w.max(axis=-3).argmax(axis=-1)
