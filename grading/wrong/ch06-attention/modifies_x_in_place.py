# wrong: shuffles the caller's x in place (x[:] = x[perm]) to get the permuted input: the gaps are right, x is not
# caught by: test_permutation
# severity: edge
# diagnosis: 就地打乱了输入
# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    out, weights = layer.forward(x)
    x[:] = x[perm]
    out_p, weights_p = layer.forward(x)
    output_gap = np.max(np.abs(out_p - out[perm]))
    weights_gap = np.max(np.abs(weights_p - weights[perm][:, perm]))
    return float(output_gap), float(weights_gap)
