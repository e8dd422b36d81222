# wrong: multiplies the upstream gradient by the weights, forgetting to subtract the weighted mean
# caught by: test_softmax_backward
# severity: essential
# diagnosis: 忘了减去加权平均
# %% softmax_backward
def softmax_backward(weights, upstream):
    return np.asarray(weights, dtype=float) * np.asarray(upstream, dtype=float)
