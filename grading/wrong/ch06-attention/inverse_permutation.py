# wrong: permutes the first result with the inverse permutation (np.argsort(perm)) instead of perm itself
# caught by: test_permutation
# severity: essential
# diagnosis: 逆排列
# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    x = np.asarray(x, dtype=float)
    back = np.argsort(perm)
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(x[perm])
    return float(np.max(np.abs(out_p - out[back]))), float(np.max(np.abs(weights_p - weights[back][:, back])))
