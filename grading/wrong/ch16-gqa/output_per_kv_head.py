# wrong: the queries of a group are averaged first, so there is one output per key/value head instead of per query head
# caught by: test_grouped_query_attention
# severity: essential
# diagnosis: 应有 h = 8 个头
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    q_mean = q.reshape(q.shape[:-3] + (h_kv, h // h_kv) + q.shape[-2:]).mean(axis=-3)
    scores = q_mean @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return anp.softmax(scores, axis=-1) @ v
