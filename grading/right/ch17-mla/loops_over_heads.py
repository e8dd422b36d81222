# right: a loop over the heads with its own softmax and rotation-free content parts; the absorbed scores head by
# head (q_c,i W_UK,i^T against the latents); the bytes from a table; the decoding step reconstructing each head's
# values from the latents
# %% mla_attention
def mla_attention(x, weights, n_heads):
    x = np.asarray(x, dtype=float)
    n = x.shape[-2]
    d_head = weights["w_uq"].shape[1] // n_heads
    d_rope = weights["w_kr"].shape[1]
    c_q, c_kv = x @ weights["w_dq"], x @ weights["w_dkv"]
    k_r = anp.apply_rope(x @ weights["w_kr"])
    future = np.triu(np.ones((n, n), dtype=bool), 1)
    outs = []
    for i in range(n_heads):
        cols, rope = slice(i * d_head, (i + 1) * d_head), slice(i * d_rope, (i + 1) * d_rope)
        q = np.concatenate([c_q @ weights["w_uq"][:, cols], anp.apply_rope(c_q @ weights["w_qr"][:, rope])], axis=-1)
        k = np.concatenate([c_kv @ weights["w_uk"][:, cols], k_r], axis=-1)
        s = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(d_head + d_rope)
        s = np.where(future, -np.inf, s)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        outs.append((e / e.sum(axis=-1, keepdims=True)) @ (c_kv @ weights["w_uv"][:, cols]))
    return np.concatenate(outs, axis=-1) @ weights["w_o"]
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r, w_uk = (np.asarray(a, dtype=float) for a in (q_c, q_r, c_kv, k_r, w_uk))
    h, d_head = q_c.shape[-3], q_c.shape[-1]
    heads = []
    for i in range(h):
        q_latent = q_c[..., i, :, :] @ w_uk[:, i * d_head:(i + 1) * d_head].T  # (..., n_q, d_latent)
        heads.append(q_latent @ np.swapaxes(c_kv, -1, -2) + q_r[..., i, :, :] @ np.swapaxes(k_r, -1, -2))
    return np.stack(heads, axis=-3) / np.sqrt(d_head + q_r.shape[-1])
# %% cache_bytes
def cache_bytes(kind, n_layers, n_tokens, dtype, *, n_heads, d_head, n_kv_heads=None, d_latent=None, d_rope=None,
                batch=1):
    import math

    needs = {"MHA": (), "GQA": (n_kv_heads,), "MQA": (), "MLA": (d_latent, d_rope)}
    if kind not in needs or any(v is None for v in needs[kind]):
        raise ValueError("kind 不认识，或缺少参数")
    if kind == "GQA" and n_heads % n_kv_heads != 0:
        raise ValueError("n_kv_heads 必须整除 n_heads")
    numbers = {"MHA": lambda: 2 * n_heads * d_head, "GQA": lambda: 2 * n_kv_heads * d_head,
               "MQA": lambda: 2 * d_head, "MLA": lambda: d_latent + d_rope}[kind]()
    return math.prod([n_layers, n_tokens, numbers, np.dtype(dtype).itemsize, batch])
# %% decode_step
def decode_step(x_new, weights, n_heads, c_cache, r_cache):
    x_new = np.asarray(x_new, dtype=float)
    t = len(c_cache)
    d_head = weights["w_uq"].shape[1] // n_heads
    d_rope = weights["w_kr"].shape[1]
    c_cache = np.vstack([c_cache, x_new @ weights["w_dkv"]])
    r_cache = np.vstack([r_cache, anp.apply_rope((x_new @ weights["w_kr"])[None], np.array([t]))])
    c_q = x_new @ weights["w_dq"]
    heads = []
    for i in range(n_heads):
        cols, rope = slice(i * d_head, (i + 1) * d_head), slice(i * d_rope, (i + 1) * d_rope)
        q = np.concatenate([c_q @ weights["w_uq"][:, cols],
                            anp.apply_rope((c_q @ weights["w_qr"][:, rope])[None], np.array([t]))[0]])
        k = np.hstack([c_cache @ weights["w_uk"][:, cols], r_cache])  # (t + 1, d_head + d_rope)
        s = k @ q / np.sqrt(d_head + d_rope)
        p = np.exp(s - s.max())
        heads.append((p / p.sum()) @ (c_cache @ weights["w_uv"][:, cols]))
    return np.concatenate(heads) @ weights["w_o"], c_cache, r_cache
