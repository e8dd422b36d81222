# wrong: masks before its own softmax, but a row with every key masked is all -inf: -inf - (-inf) gives nan
# caught by: test_masked_attention test_cross_attention
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% masked_attention
def masked_attention(q, k, v, mask=None, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    allowed = np.ones((n_q, n_k), dtype=bool)
    if mask is not None:
        allowed = allowed & np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & causal_mask(n_q, n_k)
    scores = np.where(allowed, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ v, weights
