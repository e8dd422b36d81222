# wrong: the bytes are right, but a missing n_kv_heads or d_rope and an unknown kind are not refused
# caught by: test_cache_bytes
# severity: edge
# diagnosis: 应当抛出 ValueError
# %% cache_bytes
def cache_bytes(kind, n_layers, n_tokens, dtype, *, n_heads, d_head, n_kv_heads=None, d_latent=None, d_rope=None,
                batch=1):
    per_token = {"MHA": 2 * n_heads * d_head, "GQA": 2 * (n_kv_heads or n_heads) * d_head, "MQA": 2 * d_head,
                 "MLA": (d_latent or 0) + (d_rope or 0)}.get(kind, 0)
    return n_layers * n_tokens * per_token * np.dtype(dtype).itemsize * batch
