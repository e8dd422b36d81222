# wrong: the formula without the factor 2: only the keys are counted, not the values
# caught by: test_kv_cache_bytes
# severity: essential
# diagnosis: 键和值各存一份
# %% kv_cache_bytes
def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    return n_layers * n_tokens * n_heads * d_head * np.dtype(dtype).itemsize * batch
