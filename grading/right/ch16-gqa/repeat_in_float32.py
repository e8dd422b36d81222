# right: np.repeat along the head axis, then ordinary multi-head attention, computed in float32;
# the pooling with np.split and np.mean over a stacked list
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x, dtype=np.float32) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    k_all = np.repeat(k, h // h_kv, axis=-3)
    v_all = np.repeat(v, h // h_kv, axis=-3)
    scores = q @ np.swapaxes(k_all, -1, -2) / np.float32(np.sqrt(q.shape[-1]))
    return anp.softmax(scores, axis=-1) @ v_all
# %% pool_kv_heads
def pool_kv_heads(w, n_heads, n_kv_heads):
    w = np.asarray(w)
    if w.shape[1] % n_heads or n_heads % n_kv_heads:
        raise ValueError("不能整除")
    heads = np.split(w, n_heads, axis=1)  # n_heads blocks of d_head columns
    g = n_heads // n_kv_heads
    return np.concatenate([np.mean(heads[j * g:(j + 1) * g], axis=0) for j in range(n_kv_heads)], axis=1)
