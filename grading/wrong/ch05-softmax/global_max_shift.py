# wrong: subtracts the maximum of the whole array instead of each slice's own: a slice far below it underflows to 0/0
# caught by: test_softmax_stable
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% softmax_stable
def softmax_stable(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x))
    return e / np.sum(e, axis=axis, keepdims=True)
