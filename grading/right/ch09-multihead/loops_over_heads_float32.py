# right: computes in float32, one head at a time in a Python loop, with a preallocated output for the heads
# %% multi_head_attention
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q, x_kv = np.asarray(x_q, dtype=np.float32), np.asarray(x_kv, dtype=np.float32)
    q, k, v = x_q @ w_q.astype(np.float32), x_kv @ w_k.astype(np.float32), x_kv @ w_v.astype(np.float32)
    d_model = q.shape[-1]
    d_head = d_model // n_heads
    n_q, n_k = q.shape[-2], k.shape[-2]
    concat = np.empty(q.shape[:-1] + (d_model,), dtype=np.float32)
    weights = np.empty(q.shape[:-2] + (n_heads, n_q, n_k), dtype=np.float32)
    for i in range(n_heads):
        cols = slice(i * d_head, (i + 1) * d_head)
        s = q[..., cols] @ np.swapaxes(k[..., cols], -1, -2) / np.float32(np.sqrt(d_head))
        w = anp.softmax(s, mask=mask)
        weights[..., i, :, :] = w
        concat[..., cols] = w @ v[..., cols]
    return concat @ w_o.astype(np.float32), weights
