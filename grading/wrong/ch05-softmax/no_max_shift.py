# wrong: exp straight from the formula, without subtracting the maximum: large scores overflow to inf / inf = nan
# caught by: test_softmax_stable
# severity: essential
# diagnosis: 个 NaN（期望里没有）
# %% softmax_stable
def softmax_stable(x, axis=-1):
    e = np.exp(np.asarray(x, dtype=float))
    return e / np.sum(e, axis=axis, keepdims=True)
