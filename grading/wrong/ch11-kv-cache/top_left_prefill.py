# wrong: np.tril on the (t_new, n) rectangle aligns the causal mask top-left: new positions miss the cached keys
# caught by: test_cached_attention_step
# severity: essential
# diagnosis: 对齐到了左上角
# %% cached_attention_step
def cached_attention_step(q, k, v, cache, layer):
    keys, values = cache.append(layer, k, v)
    q = np.asarray(q, dtype=float)
    scores = q @ np.swapaxes(keys, -1, -2) / np.sqrt(q.shape[-1])
    allowed = np.tril(np.ones((q.shape[-2], keys.shape[-2]), dtype=bool))
    return anp.softmax(scores, mask=allowed) @ values
