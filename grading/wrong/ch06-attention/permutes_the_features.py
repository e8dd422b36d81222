# wrong: applies the permutation to the features (x[:, perm]) instead of the tokens (the rows)
# caught by: test_permutation
# severity: essential
# diagnosis: 打乱特征（x 的列，x[:, perm]）
# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    x = np.asarray(x, dtype=float)
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(x[:, perm])
    return float(np.max(np.abs(out_p - out[perm]))), float(np.max(np.abs(weights_p - weights[perm][:, perm])))
