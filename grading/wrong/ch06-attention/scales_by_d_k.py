# wrong: divides the scores by d_k instead of sqrt(d_k) (the weights come out too flat)
# caught by: test_sdpa
# severity: essential
# diagnosis: 缩放因子是 1/√d_k，不是 1/d_k
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    scores = q @ np.swapaxes(k, -1, -2) / q.shape[-1]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.exp(scores - top)
    total = np.sum(e, axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights
