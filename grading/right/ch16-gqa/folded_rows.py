# right: each group's query heads folded into the rows of one matrix (q as (..., h_kv, g·n_q, d)), no copy of k, v
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    h, n_q, d = q.shape[-3:]
    h_kv = k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍，k 与 v 的头数必须相同")
    rows = q.reshape(q.shape[:-3] + (h_kv, (h // h_kv) * n_q, d))  # one group's heads, one above the other
    weights = anp.softmax(rows @ np.swapaxes(k, -1, -2) / np.sqrt(d), axis=-1)  # (..., h_kv, g·n_q, n_k)
    out = weights @ v  # (..., h_kv, g·n_q, d_v)
    return out.reshape(out.shape[:-3] + (h, n_q, v.shape[-1]))
