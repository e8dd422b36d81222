# wrong: multiplies the upstream gradient by the weights, forgetting to subtract the weighted mean
# caught by: test_softmax_backward
# %% softmax_backward
def softmax_backward(weights, upstream):
    return np.asarray(weights, dtype=float) * np.asarray(upstream, dtype=float)
