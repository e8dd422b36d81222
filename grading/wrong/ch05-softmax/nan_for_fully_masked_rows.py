# wrong: -inf where masked, then the plain stable softmax: a fully masked row gives -inf - (-inf) = nan
# caught by: test_masked_softmax
# severity: essential
# diagnosis: 个 NaN（期望里没有）
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    scores = np.where(mask, np.asarray(x, dtype=float), -np.inf)
    e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)
