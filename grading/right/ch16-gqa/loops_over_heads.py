# right: a loop over the query heads, each reading its key/value head i // g with einsum and its own softmax;
# the bytes as math.prod; the pooling as a loop over groups and heads
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x, dtype=float) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    g = h // h_kv
    outs = []
    for i in range(h):
        s = np.einsum("...qd,...kd->...qk", q[..., i, :, :], k[..., i // g, :, :]) / np.sqrt(q.shape[-1])
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        outs.append(np.einsum("...qk,...kd->...qd", e / e.sum(axis=-1, keepdims=True), v[..., i // g, :, :]))
    return np.stack(outs, axis=-3)
# %% gqa_cache_bytes
def gqa_cache_bytes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, dtype, batch=1):
    import math

    if n_heads % n_kv_heads != 0:
        raise ValueError("键值头数必须整除查询头数")
    return math.prod([n_layers, 2, n_tokens, n_kv_heads, d_head, np.dtype(dtype).itemsize, batch])
# %% pool_kv_heads
def pool_kv_heads(w, n_heads, n_kv_heads):
    w = np.array(w, dtype=float)
    if w.shape[1] % n_heads or n_heads % n_kv_heads:
        raise ValueError("不能整除")
    d_head, g = w.shape[1] // n_heads, n_heads // n_kv_heads
    out = np.zeros((w.shape[0], n_kv_heads * d_head))
    for j in range(n_kv_heads):
        for i in range(j * g, (j + 1) * g):
            out[:, j * d_head:(j + 1) * d_head] += w[:, i * d_head:(i + 1) * d_head] / g
    return out
