# right: cosines with einsum and hand-written lengths; occlusion by deleting the token and attending with its own
#   softmax; the backward pass through each row's Jacobian diag(α) − α αᵀ
# %% cosine_scores
def cosine_scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    q_len = np.sqrt(np.einsum("...id,...id->...i", q, q))
    k_len = np.sqrt(np.einsum("...jd,...jd->...j", k, k))
    return np.einsum("...id,...jd->...ij", q, k) / (q_len[..., :, None] * k_len[..., None, :])
# %% occlusion_effect
def occlusion_effect(q, k, v):
    q, k, v = np.asarray(q, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)

    def attend(keys, values):
        if len(keys) == 0:
            return np.zeros(v.shape[-1])
        s = keys @ q / np.sqrt(len(q))
        e = np.exp(s - s.max())
        return (e / e.sum()) @ values

    full = attend(k, v)
    return np.array([np.linalg.norm(full - attend(np.delete(k, j, axis=0), np.delete(v, j, axis=0)))
                     for j in range(len(k))])
# %% softmax_backward
def softmax_backward(weights, upstream):
    weights, upstream = np.asarray(weights, dtype=float), np.asarray(upstream, dtype=float)
    rows_w = weights.reshape(-1, weights.shape[-1])
    rows_u = upstream.reshape(-1, weights.shape[-1])
    grad = np.empty_like(rows_w)
    for r, (a, u) in enumerate(zip(rows_w, rows_u, strict=True)):
        jacobian = np.diag(a) - np.outer(a, a)
        grad[r] = jacobian.T @ u
    return grad.reshape(weights.shape)
