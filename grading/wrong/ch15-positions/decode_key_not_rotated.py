# wrong: only the query is rotated; the new key enters the cache unrotated
# caught by: test_rope_decode_step
# severity: essential
# diagnosis: 新的键没有旋转
# %% rope_decode_step
def rope_decode_step(q, k, v, keys, values):
    t, t_new = keys.shape[-2], q.shape[-2]
    q = anp.apply_rope(np.asarray(q, dtype=float), np.arange(t, t + t_new))
    new_keys = np.concatenate([keys, k], axis=-2)
    new_values = np.concatenate([values, v], axis=-2)
    scores = q @ np.swapaxes(new_keys, -1, -2) / np.sqrt(q.shape[-1])
    weights = anp.softmax(scores, mask=anp.causal_mask(t_new, t + t_new))
    return weights @ new_values, new_keys, new_values
