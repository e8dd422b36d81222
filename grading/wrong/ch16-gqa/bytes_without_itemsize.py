# wrong: the cache's numbers are counted, not its bytes (the item size is left out)
# caught by: test_gqa_cache_bytes
# severity: essential
# diagnosis: 没有乘每个数的字节数
# %% gqa_cache_bytes
def gqa_cache_bytes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, dtype, batch=1):
    if n_heads % n_kv_heads:
        raise ValueError("n_kv_heads 必须整除 n_heads")
    return n_layers * 2 * n_tokens * n_kv_heads * d_head * batch
