# wrong: the values are rotated by RoPE as well as the queries and keys
# caught by: test_attention_sublayer
# severity: essential
# diagnosis: 值也按位置旋转了
# %% attention_sublayer
def attention_sublayer(x, w, n_heads, n_kv_heads, rope_base, eps):
    x = np.asarray(x)
    n = x.shape[0]
    d_head = w["attn_q"].shape[0] // n_heads
    g = n_heads // n_kv_heads

    def heads(y, count):
        return y.reshape(n, count, d_head).transpose(1, 0, 2)

    h = rms_norm(x, w["attn_norm"], eps)
    q = anp.apply_rope(heads(h @ w["attn_q"].T, n_heads), base=rope_base)
    k = anp.apply_rope(heads(h @ w["attn_k"].T, n_kv_heads), base=rope_base)
    v = anp.apply_rope(heads(h @ w["attn_v"].T, n_kv_heads), base=rope_base)
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d_head)
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    out = anp.softmax(scores, axis=-1) @ v
    return out.transpose(1, 0, 2).reshape(n, n_heads * d_head) @ w["attn_output"].T
