# right: computes in float32; the masked scores are replaced by the dtype's lowest value before its own softmax,
#   and rows with every key masked are zeroed afterwards
# %% masked_attention
def masked_attention(q, k, v, mask=None, causal=False):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = (q @ np.swapaxes(k, -1, -2)) / np.float32(np.sqrt(q.shape[-1]))
    allowed = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        allowed &= np.broadcast_to(np.asarray(mask, dtype=bool), scores.shape)
    if causal:
        allowed &= causal_mask(n_q, n_k)
    scores = np.where(allowed, scores, np.finfo(np.float32).min)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True)) * allowed
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights
