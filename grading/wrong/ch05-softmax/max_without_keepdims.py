# wrong: the row maxima are taken without keepdims=True, so a (n,) vector is subtracted along the columns of an
# (n, n) score matrix: right for a single row, wrong weights as soon as there are several rows
# caught by: test_masked_softmax
# severity: essential
# diagnosis: 个数不一致
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    scores = np.where(mask, np.asarray(x, dtype=float), -np.inf)
    top = np.max(scores, axis=axis)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
