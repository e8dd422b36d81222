# wrong: softmax over every key first, then the masked weights set to 0: rows no longer sum to 1 and the future leaks
# caught by: test_masked_attention test_cross_attention
# severity: essential
# diagnosis: 每行权重之和小于 1
# %% masked_attention
def masked_attention(q, k, v, mask=None, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k = q.shape[-2], k.shape[-2]
    weights = anp.softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]))
    allowed = np.ones((n_q, n_k), dtype=bool)
    if mask is not None:
        allowed = allowed & np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & causal_mask(n_q, n_k)
    weights = weights * allowed
    return weights @ v, weights
