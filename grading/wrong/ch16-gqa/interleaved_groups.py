# wrong: query head i reads key/value head i % h_kv (np.tile: interleaved groups) instead of i // g
# caught by: test_grouped_query_attention
# severity: essential
# diagnosis: 交错分组
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    reps = (1,) * (k.ndim - 3) + (h // h_kv, 1, 1)
    k_all, v_all = np.tile(k, reps), np.tile(v, reps)  # heads 0, 1, ..., 0, 1, ...
    scores = q @ np.swapaxes(k_all, -1, -2) / np.sqrt(q.shape[-1])
    return anp.softmax(scores, axis=-1) @ v_all
