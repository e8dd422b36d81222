# wrong: masked scores replaced by -1e9 instead of -inf: a fully masked row becomes uniform, not zero
# caught by: test_masked_softmax
# severity: essential
# diagnosis: 得到了均匀的权重
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    scores = np.where(mask, x, -1e9)
    e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
