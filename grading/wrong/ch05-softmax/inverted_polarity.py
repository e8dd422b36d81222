# wrong: reads True as "masked": the weights land exactly on the positions that must get none
# caught by: test_masked_softmax
# severity: essential
# diagnosis: 不要把含义弄反
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    scores = np.where(mask, -np.inf, x)
    top = np.max(scores, axis=axis, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
