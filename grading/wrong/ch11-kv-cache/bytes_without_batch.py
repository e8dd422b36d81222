# wrong: the formula for one sequence: the batch argument is ignored
# caught by: test_kv_cache_bytes
# severity: essential
# diagnosis: 每个序列都有自己的缓存
# %% kv_cache_bytes
def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    return 2 * n_layers * n_tokens * n_heads * d_head * np.dtype(dtype).itemsize
