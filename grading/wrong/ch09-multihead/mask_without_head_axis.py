# wrong: the mask is passed on as it is, without a head axis: a (B, n_q, n_k) mask lines up B with the heads
# caught by: test_multi_head_attention
# severity: essential
# diagnosis: 批量维对上了头的维度
# %% multi_head_attention
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q, x_kv = np.asarray(x_q, dtype=float), np.asarray(x_kv, dtype=float)
    q = split_heads(x_q @ w_q, n_heads)
    k = split_heads(x_kv @ w_k, n_heads)
    v = split_heads(x_kv @ w_v, n_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    weights = anp.softmax(scores, mask=mask)
    return merge_heads(weights @ v) @ w_o, weights
