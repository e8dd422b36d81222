# wrong: the gaps are the largest signed difference, without np.abs: a layer whose biggest change is negative is
# reported smaller than it is (and can even come out negative)
# caught by: test_permutation
# severity: essential
# diagnosis: 个数不一致
# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    x = np.asarray(x, dtype=float)
    perm = np.asarray(perm)
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(x[perm])
    return float(np.max(out_p - out[perm])), float(np.max(weights_p - weights[perm][:, perm]))
