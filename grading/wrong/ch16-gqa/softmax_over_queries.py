# wrong: the softmax runs over the queries (axis=-2), so each key's weights sum to 1 instead of each query's
# caught by: test_grouped_query_attention
# severity: essential
# diagnosis: softmax 沿查询那一维（axis=-2）做了
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    g = h // h_kv
    k_all, v_all = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    scores = q @ np.swapaxes(k_all, -1, -2) / np.sqrt(q.shape[-1])
    return anp.softmax(scores, axis=-2) @ v_all
