# wrong: MLA counted with one rope key per head, d_latent + h * d_rope per token, though k_r is shared by all heads
# caught by: test_cache_bytes
# severity: essential
# diagnosis: 每个头各存了一个 RoPE 键
# %% cache_bytes
def cache_bytes(kind, n_layers, n_tokens, dtype, *, n_heads, d_head, n_kv_heads=None, d_latent=None, d_rope=None,
                batch=1):
    counts = {"MHA": lambda: 2 * n_heads * d_head, "MQA": lambda: 2 * d_head}
    if kind == "GQA":
        if n_kv_heads is None or n_heads % n_kv_heads:
            raise ValueError("n_kv_heads")
        per_token = 2 * n_kv_heads * d_head
    elif kind == "MLA":
        if d_latent is None or d_rope is None:
            raise ValueError("d_latent, d_rope")
        per_token = d_latent + n_heads * d_rope  # 每个头一个 RoPE 键
    elif kind in counts:
        per_token = counts[kind]()
    else:
        raise ValueError(kind)
    return n_layers * n_tokens * per_token * np.dtype(dtype).itemsize * batch
