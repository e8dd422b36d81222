# wrong: no mask, since "one new token may see every key": right for single steps, but a prefill of several
# positions lets the earlier ones see the later ones
# caught by: test_cached_attention_step
# severity: essential
# diagnosis: 看到了排在它们后面的位置
# %% cached_attention_step
def cached_attention_step(q, k, v, cache, layer):
    keys, values = cache.append(layer, k, v)
    q = np.asarray(q, dtype=float)
    scores = q @ np.swapaxes(keys, -1, -2) / np.sqrt(q.shape[-1])
    return anp.softmax(scores) @ values
