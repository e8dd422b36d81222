# right: computes in float32 with broadcasting, the occlusion by a batch of masks (one row per removed token)
# %% cosine_scores
def cosine_scores(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    return np.matmul(q, np.swapaxes(k, -1, -2))
# %% occlusion_effect
def occlusion_effect(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    n = len(k)
    full, _ = anp.scaled_dot_product_attention(q[None, :], k, v)
    keep = ~np.eye(n, dtype=bool)[:, None, :]  # (n, 1, n): row j masks token j
    qs = np.broadcast_to(q[None, None, :], (n, 1, len(q)))
    without, _ = anp.scaled_dot_product_attention(qs, k, v, mask=keep)
    return np.linalg.norm(without[:, 0, :] - full[0], axis=-1)
# %% softmax_backward
def softmax_backward(weights, upstream):
    weights, upstream = np.asarray(weights, dtype=np.float32), np.asarray(upstream, dtype=np.float32)
    return weights * upstream - weights * (weights * upstream).sum(axis=-1, keepdims=True)
