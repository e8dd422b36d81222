# right: einsum for the dot products and the scores, and the common log(w + 1e-12) guard in the entropy
# %% dot_product_variance
def dot_product_variance(d_k, n_samples=20_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    return float(np.einsum("ij,ij->i", q, k).var())
# %% scaled_scores
def scaled_scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q 和 k 的最后一维必须相同")
    return np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    return -np.sum(w * np.log(w + 1e-12), axis=-1)
