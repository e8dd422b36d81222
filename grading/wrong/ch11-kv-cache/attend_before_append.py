# wrong: "the new token only matches its query against the cached keys": it attends to the old cache, then appends,
# so a new position never sees its own key (and the first step finds nothing cached)
# caught by: test_cached_attention_step
# severity: essential
# diagnosis: 新位置没有看到自己的键
# %% cached_attention_step
def cached_attention_step(q, k, v, cache, layer):
    q = np.asarray(q, dtype=float)
    try:
        keys, values = cache.read(layer)
    except ValueError:  # nothing cached yet: fall back to the new positions alone
        keys, values = np.asarray(k, dtype=float), np.asarray(v, dtype=float)
        cache.append(layer, k, v)
        t = q.shape[-2]
        scores = q @ np.swapaxes(keys, -1, -2) / np.sqrt(q.shape[-1])
        return anp.softmax(scores, mask=np.tril(np.ones((t, t), dtype=bool))) @ values
    scores = q @ np.swapaxes(keys, -1, -2) / np.sqrt(q.shape[-1])
    out = anp.softmax(scores) @ values
    cache.append(layer, k, v)
    return out
