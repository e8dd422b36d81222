# wrong: softmax over every key, the masked weights set to 0, then each row divided by what is left: right in exact
#   arithmetic, but a masked score far above the others underflows the rest to 0 and the row becomes 0/0 = nan
# caught by: test_masked_attention
# severity: essential
# diagnosis: 个 NaN（期望里没有）
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
    weights = weights / weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights
