# wrong: the cache is counted with the query heads h, as multi-head attention would store it
# caught by: test_gqa_cache_bytes
# severity: essential
# diagnosis: 按查询头数 h 算了
# %% gqa_cache_bytes
def gqa_cache_bytes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, dtype, batch=1):
    if n_heads % n_kv_heads:
        raise ValueError("n_kv_heads 必须整除 n_heads")
    return n_layers * 2 * n_tokens * n_heads * d_head * np.dtype(dtype).itemsize * batch
