# wrong: the key/value heads are repeated along axis 0, right only while there are no batch dimensions
# caught by: test_grouped_query_attention
# severity: edge
# diagnosis: 调用时抛出了异常
# %% grouped_query_attention
def grouped_query_attention(q, k, v):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    h, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv or h % h_kv:
        raise ValueError("h 必须是 h_kv 的整数倍")
    k_all, v_all = np.repeat(k, h // h_kv, axis=0), np.repeat(v, h // h_kv, axis=0)
    scores = q @ np.swapaxes(k_all, -1, -2) / np.sqrt(q.shape[-1])
    return anp.softmax(scores, axis=-1) @ v_all
