# wrong: right values, but it forms the n x n matrix phi(Q) phi(K)^T (tril when causal): O(n^2) memory
# caught by: test_linear_attention
# severity: essential
# diagnosis: 约为 4 倍（构造 n×n 的矩阵时约为 16 倍）：未通过
# %% linear_attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    weights = phi(q) @ phi(k).T  # (n_q, n_k): the matrix the exercise avoids
    if causal:
        weights = np.tril(weights)
    return weights @ v / weights.sum(axis=1, keepdims=True)


def linear_error(q, k, v):
    v = np.asarray(v, dtype=float)
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean(diff**2)) / np.sqrt(np.mean(v**2)))
