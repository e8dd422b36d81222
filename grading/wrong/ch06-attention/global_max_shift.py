# wrong: subtracts the largest score of the whole matrix, not each row's own: a row far below it underflows to 0
# caught by: test_sdpa
# severity: edge
# diagnosis: 减去整个分数矩阵的最大值、而不是每一行自己的最大值
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores)
    e = np.exp(scores - (top if np.isfinite(top) else 0.0))
    total = np.sum(e, axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights
