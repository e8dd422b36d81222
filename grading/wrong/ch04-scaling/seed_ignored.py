# wrong: draws from an unseeded generator (np.random.default_rng()), so the same seed gives a different result each call
# caught by: test_dot_product_variance
# severity: edge
# diagnosis: 同一个 seed 给出同一个结果（随机数由 np.random.default_rng(seed) 生成）：未通过
# %% dot_product_variance
def dot_product_variance(d_k, n_samples=20_000, seed=0):
    rng = np.random.default_rng()
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.var(np.sum(q * k, axis=1)))
