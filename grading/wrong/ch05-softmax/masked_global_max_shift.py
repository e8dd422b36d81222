# wrong: subtracts the largest allowed score of the whole array, not each row's own: a row far below it underflows to 0
# caught by: test_masked_softmax
# severity: edge
# diagnosis: 减去整个数组的最大值、而不是每一行自己的最大值
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    scores = np.where(mask, np.asarray(x, dtype=float), -np.inf)
    top = np.max(scores)
    e = np.exp(scores - (top if np.isfinite(top) else 0.0))
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
