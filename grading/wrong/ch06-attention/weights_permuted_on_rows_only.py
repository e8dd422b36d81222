# wrong: permutes only the rows of the weights (weights[perm]), not their columns as well
# caught by: test_permutation
# severity: essential
# diagnosis: 只重排了行
# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    x = np.asarray(x, dtype=float)
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(x[perm])
    return float(np.max(np.abs(out_p - out[perm]))), float(np.max(np.abs(weights_p - weights[perm])))
