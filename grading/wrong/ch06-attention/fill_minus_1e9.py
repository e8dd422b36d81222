# wrong: masks with -1e9 instead of -inf, so a fully masked row gets uniform weights and outputs the mean of V
# caught by: test_sdpa
# severity: essential
# diagnosis: 均匀的权重
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    e = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights
