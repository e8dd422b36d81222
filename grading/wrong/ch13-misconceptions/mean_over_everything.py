# wrong: the weighted mean is summed over the whole array, not along each row: right only for a single row
# caught by: test_softmax_backward
# severity: essential
# diagnosis: 不是每一行自己的
# %% softmax_backward
def softmax_backward(weights, upstream):
    weights = np.asarray(weights, dtype=float)
    upstream = np.asarray(upstream, dtype=float)
    return weights * (upstream - np.sum(weights * upstream))
