# wrong: the heads are concatenated but never mixed by W_O
# caught by: test_multi_head_attention
# severity: essential
# diagnosis: 没有乘以 W_O
# %% multi_head_attention
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q, x_kv = np.asarray(x_q, dtype=float), np.asarray(x_kv, dtype=float)
    q = split_heads(x_q @ w_q, n_heads)
    k = split_heads(x_kv @ w_k, n_heads)
    v = split_heads(x_kv @ w_v, n_heads)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    allowed = None if mask is None else np.asarray(mask, dtype=bool)[..., None, :, :]
    weights = anp.softmax(scores, mask=allowed)
    return merge_heads(weights @ v), weights
