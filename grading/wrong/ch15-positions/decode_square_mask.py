# wrong: the causal mask is built for the new positions only (t_new x t_new), as if the cache were empty: it
# broadcasts while one token comes at a time (a 1 x 1 mask) or the cache is empty, and fails for several new tokens
# after a cache
# caught by: test_rope_decode_step
# severity: essential
# diagnosis: 调用时抛出了异常 ValueError
# %% rope_decode_step
def rope_decode_step(q, k, v, keys, values):
    t, t_new = keys.shape[-2], q.shape[-2]
    where = np.arange(t, t + t_new)
    q = anp.apply_rope(np.asarray(q, dtype=float), where)
    new_keys = np.concatenate([keys, anp.apply_rope(np.asarray(k, dtype=float), where)], axis=-2)
    new_values = np.concatenate([values, v], axis=-2)
    scores = q @ np.swapaxes(new_keys, -1, -2) / np.sqrt(q.shape[-1])
    weights = anp.softmax(scores, mask=anp.causal_mask(t_new))  # 只有新位置的方阵
    return weights @ new_values, new_keys, new_values
