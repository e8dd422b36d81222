# wrong: takes the variance of the d_k component products inside each pair (axis=1) instead of the variance of the
# dot products across pairs: it measures about 1 whatever d_k is
# caught by: test_dot_product_variance
# severity: essential
# diagnosis: 与 d_k 无关
# %% dot_product_variance
def dot_product_variance(d_k, n_samples=20_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.mean(np.var(q * k, axis=1)))
