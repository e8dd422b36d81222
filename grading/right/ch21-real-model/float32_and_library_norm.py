# right: everything in float32; the sub-layer calls attnlib.numpy.llama.rms_norm (allowed in exercise 3) and
# builds the causal mask with np.triu; the induction score through np.diagonal of the second pass
# %% attention_sublayer
def attention_sublayer(x, w, n_heads, n_kv_heads, rope_base, eps):
    from attnlib.numpy import llama

    x = np.asarray(x, dtype=np.float32)
    w = {name: np.asarray(value, dtype=np.float32) for name, value in w.items()}
    n = x.shape[0]
    d_head = w["attn_q"].shape[0] // n_heads
    h = llama.rms_norm(x, w["attn_norm"], eps)
    q = anp.apply_rope((h @ w["attn_q"].T).reshape(n, n_heads, d_head).transpose(1, 0, 2), base=rope_base)
    k = anp.apply_rope((h @ w["attn_k"].T).reshape(n, n_kv_heads, d_head).transpose(1, 0, 2), base=rope_base)
    v = (h @ w["attn_v"].T).reshape(n, n_kv_heads, d_head).transpose(1, 0, 2)
    q = q.reshape(n_kv_heads, n_heads // n_kv_heads * n, d_head)  # 每组的查询头叠成一个矩阵的行
    scores = q @ k.transpose(0, 2, 1) / np.float32(np.sqrt(d_head))
    future = np.triu(np.ones((n, n), dtype=bool), k=1)
    scores = np.where(np.tile(future, (n_heads // n_kv_heads, 1)), -np.inf, scores)
    out = (anp.softmax(scores, axis=-1) @ v).reshape(n_heads, n, d_head)
    return out.transpose(1, 0, 2).reshape(n, n_heads * d_head) @ w["attn_output"].T
# %% induction_scores
def induction_scores(weights, period):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    if not 0 < period < n:
        raise ValueError("period 应在 1 到 n - 1 之间")
    diagonal = np.diagonal(weights, offset=-(period - 1), axis1=-2, axis2=-1)  # t = T-1 … n-1
    return diagonal[..., 1:].mean(axis=-1)
