# wrong: draws one array and uses it as both q and k, so each "dot product" is |q|^2 (mean d_k, variance 2 d_k)
# caught by: test_dot_product_variance
# severity: essential
# diagnosis: 同一组随机数
# %% dot_product_variance
def dot_product_variance(d_k, n_samples=20_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = q
    return float(np.var(np.sum(q * k, axis=1)))
