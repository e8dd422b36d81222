# wrong: the heads are left out of the formula, as if one head's keys and values were the layer's (with 32 layers
# and 32 heads this is the same number as leaving out the layers)
# caught by: test_kv_cache_bytes
# severity: essential
# diagnosis: 少了头数
# %% kv_cache_bytes
def kv_cache_bytes(n_layers, n_heads, d_head, n_tokens, dtype, batch=1):
    return n_layers * 2 * n_tokens * d_head * np.dtype(dtype).itemsize * batch
