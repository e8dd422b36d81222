# wrong: exponentiates the allowed scores without subtracting their maximum: masked entries and fully masked rows are
# handled, but an allowed score in the thousands overflows to inf / inf = nan
# caught by: test_masked_softmax
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.where(mask, np.exp(np.where(mask, x, 0.0)), 0.0)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
