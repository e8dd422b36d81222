# right: the step as loops over the new positions, with einsum scores and its own softmax over the allowed keys;
# the bytes as math.prod of the factors
# %% cached_attention_step
def cached_attention_step(q, k, v, cache, layer):
    keys, values = cache.append(layer, k, v)
    q = np.asarray(q, dtype=float)
    t_new, n, d = q.shape[-2], keys.shape[-2], q.shape[-1]
    out = np.empty(q.shape[:-1] + (values.shape[-1],))
    for i in range(t_new):
        seen = n - t_new + i + 1  # keys 0 .. n - t_new + i
        s = np.einsum("...d,...jd->...j", q[..., i, :], keys[..., :seen, :]) / d**0.5
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
        out[..., i, :] = np.einsum("...j,...jd->...d", w, values[..., :seen, :])
    return out
# %% kv_cache_bytes
def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    import math

    keys_and_values = 2
    return math.prod([n_layers, keys_and_values, n_tokens, n_heads, d_head, np.dtype(dtype).itemsize, batch])
