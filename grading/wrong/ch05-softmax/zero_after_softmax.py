# wrong: a softmax over every position, then the masked weights set to 0 without renormalising: rows sum to less than 1
# caught by: test_masked_softmax
# severity: essential
# diagnosis: 其余权重之和小于 1
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return np.where(mask, e / np.sum(e, axis=axis, keepdims=True), 0.0)
