# wrong: MLA's cache counted as the per-head keys and values it reconstructs (2 h d_head per token), not the latent
# caught by: test_cache_bytes
# severity: essential
# diagnosis: 按每个头的键和值算了
# %% cache_bytes
def cache_bytes(kind, n_layers, n_tokens, dtype, *, n_heads, d_head, n_kv_heads=None, d_latent=None, d_rope=None,
                batch=1):
    if kind not in ("MHA", "GQA", "MQA", "MLA"):
        raise ValueError(kind)
    if kind == "GQA" and (n_kv_heads is None or n_heads % n_kv_heads):
        raise ValueError("n_kv_heads")
    if kind == "MLA" and (d_latent is None or d_rope is None):
        raise ValueError("d_latent, d_rope")
    heads = {"MHA": n_heads, "GQA": n_kv_heads, "MQA": 1, "MLA": n_heads}[kind]  # MLA：每个头的键和值
    return n_layers * n_tokens * 2 * heads * d_head * np.dtype(dtype).itemsize * batch
