# wrong: the formula is right but a number of key/value heads that does not divide the query heads is accepted
# caught by: test_gqa_cache_bytes
# severity: edge
# diagnosis: 应当抛出 ValueError
# %% gqa_cache_bytes
def gqa_cache_bytes(n_layers, n_heads, n_kv_heads, d_head, n_tokens, dtype, batch=1):
    return n_layers * 2 * n_tokens * n_kv_heads * d_head * np.dtype(dtype).itemsize * batch
