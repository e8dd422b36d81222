# wrong: exponentiates the scores without subtracting each row's maximum: right on ordinary scores, nan once a score
# in the thousands overflows to inf / inf
# caught by: test_sdpa
# severity: essential
# diagnosis: 个 NaN（期望里没有）
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    e = np.exp(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    if mask is not None:
        e = np.where(mask, e, 0.0)
    total = np.sum(e, axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights
