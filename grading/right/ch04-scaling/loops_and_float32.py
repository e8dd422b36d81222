# right: a Python loop over the pairs, scores computed in float32, and the entropy summed row by row with math.log
# %% dot_product_variance
def dot_product_variance(d_k, n_samples=20_000, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n_samples, d_k))
    k = rng.standard_normal((n_samples, d_k))
    dots = [float(q[i] @ k[i]) for i in range(n_samples)]
    mean = sum(dots) / n_samples
    return sum((d - mean) ** 2 for d in dots) / n_samples
# %% scaled_scores
def scaled_scores(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不一致：{q.shape[-1]} 与 {k.shape[-1]}")
    return np.matmul(q, k.swapaxes(-1, -2)) / np.float32(np.sqrt(q.shape[-1]))
# %% row_entropy
import math  # noqa: E402 (a cell of its own in the notebook)


def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    rows = w.reshape(-1, w.shape[-1])
    out = [-sum(a * math.log(a) for a in row if a > 0) for row in rows]
    return np.array(out).reshape(w.shape[:-1])
