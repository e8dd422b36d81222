# wrong: the cache's numbers are counted, not its bytes: the item size is left out (with float16 this is exactly
# half the answer, as a dropped factor 2 would be, so only the float32 check can name it)
# caught by: test_kv_cache_bytes
# severity: essential
# diagnosis: 没有乘每个数的字节数
# %% kv_cache_bytes
def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    return n_layers * 2 * n_tokens * n_heads * d_head * batch
