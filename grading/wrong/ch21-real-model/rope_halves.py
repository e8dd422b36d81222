# wrong: a hand-written RoPE that pairs feature i with i + d_head/2 (Hugging Face's layout), not adjacent pairs
# caught by: test_attention_sublayer
# severity: essential
# diagnosis: RoPE 把每个头的前一半与后一半配对了
# %% attention_sublayer
def attention_sublayer(x, w, n_heads, n_kv_heads, rope_base, eps):
    x = np.asarray(x)
    n = x.shape[0]
    d_head = w["attn_q"].shape[0] // n_heads
    g = n_heads // n_kv_heads
    half = d_head // 2
    angles = np.arange(n)[:, None] * rope_base ** (-np.arange(half) * 2 / d_head)  # (n, d_head/2)
    cos, sin = np.cos(angles), np.sin(angles)

    def heads(y, count):
        return y.reshape(n, count, d_head).transpose(1, 0, 2)

    def rotate(y):  # 前一半与后一半配对
        first, second = y[..., :half], y[..., half:]
        return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)

    h = rms_norm(x, w["attn_norm"], eps)
    q = rotate(heads(h @ w["attn_q"].T, n_heads))
    k = rotate(heads(h @ w["attn_k"].T, n_kv_heads))
    v = heads(h @ w["attn_v"].T, n_kv_heads)
    k, v = np.repeat(k, g, axis=0), np.repeat(v, g, axis=0)
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d_head)
    scores = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    out = anp.softmax(scores, axis=-1) @ v
    return out.transpose(1, 0, 2).reshape(n, n_heads * d_head) @ w["attn_output"].T
