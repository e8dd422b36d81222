# right: einsum for both products, a softmax of their own with the mask applied after exp; a list of draws; P @ out @ Pᵀ
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = np.asarray(q, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"形状不匹配：q {q.shape}，k {k.shape}")
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    keep = np.ones(scores.shape, dtype=bool) if mask is None else np.broadcast_to(mask, scores.shape)
    biggest = np.max(np.where(keep, scores, -np.inf), axis=-1, keepdims=True)
    biggest[~np.isfinite(biggest)] = 0.0
    e = np.where(keep, np.exp(np.where(keep, scores, 0.0) - biggest), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    return np.einsum("...ij,...jd->...id", weights, v), weights


# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        if d_v is None:
            d_v = d_k
        rng = np.random.default_rng(seed)
        draws = [rng.normal(0.0, d_model ** -0.5, size=(d_model, width)) for width in (d_k, d_k, d_v)]
        self.w_q, self.w_k, self.w_v = draws

    def forward(self, x, mask=None):
        x = np.asarray(x, dtype=float)
        return scaled_dot_product_attention(x @ self.w_q, x @ self.w_k, x @ self.w_v, mask)


# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    p = np.eye(len(perm))[list(perm)]  # 排列矩阵：P @ x 就是 x[perm]
    out, weights = layer.forward(x)
    out_p, weights_p = layer.forward(p @ x)
    output_gap = float(np.abs(out_p - p @ out).max())
    weights_gap = float(np.abs(weights_p - p @ weights @ p.T).max())
    return output_gap, weights_gap
