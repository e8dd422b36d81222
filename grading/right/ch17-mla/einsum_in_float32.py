# right: everything in float32 with einsum: the causal MLA through chapter 6's scaled_dot_product_attention on the
# concatenated queries and keys, the absorbed scores as two einsums, the decoding step calling the student's own
# absorbed_scores
# %% mla_attention
def mla_attention(x, weights, n_heads):
    x = np.asarray(x, dtype=np.float32)
    w = {k: np.asarray(a, dtype=np.float32) for k, a in weights.items()}
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    q = np.concatenate([anp.split_heads(c_q @ w["w_uq"], n_heads),
                        anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads))], axis=-1)
    k_c = anp.split_heads(c_kv @ w["w_uk"], n_heads)
    k_r = anp.apply_rope(x @ w["w_kr"])[..., None, :, :]
    k = np.concatenate([k_c, np.broadcast_to(k_r, k_c.shape[:-1] + k_r.shape[-1:])], axis=-1)
    out, _ = anp.scaled_dot_product_attention(q, k, anp.split_heads(c_kv @ w["w_uv"], n_heads), causal=True)
    return anp.merge_heads(out) @ w["w_o"]
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r, w_uk = (np.asarray(a, dtype=np.float32) for a in (q_c, q_r, c_kv, k_r, w_uk))
    h, d_head = q_c.shape[-3], q_c.shape[-1]
    q_latent = np.einsum("...hqd,lhd->...hql", q_c, w_uk.reshape(-1, h, d_head))
    content = np.einsum("...hql,...kl->...hqk", q_latent, c_kv)
    position = np.einsum("...hqr,...kr->...hqk", q_r, k_r)
    return (content + position) / np.float32(np.sqrt(d_head + q_r.shape[-1]))
# %% cache_bytes
def cache_bytes(kind, n_layers, n_tokens, dtype, *, n_heads, d_head, n_kv_heads=None, d_latent=None, d_rope=None,
                batch=1):
    if kind == "MLA":
        if None in (d_latent, d_rope):
            raise ValueError("MLA 需要 d_latent 和 d_rope")
        numbers = d_latent + d_rope
    elif kind in ("MHA", "GQA", "MQA"):
        kv = {"MHA": n_heads, "GQA": n_kv_heads, "MQA": 1}[kind]
        if kv is None or n_heads % kv:
            raise ValueError("键值头数不对")
        numbers = 2 * kv * d_head
    else:
        raise ValueError(f"不认识 {kind}")
    return int(np.int64(n_layers) * n_tokens * numbers * np.dtype(dtype).itemsize * batch)
# %% decode_step
def decode_step(x_new, weights, n_heads, c_cache, r_cache):
    w = {k: np.asarray(a, dtype=np.float32) for k, a in weights.items()}
    x1 = np.asarray(x_new, dtype=np.float32)[None, :]
    t = np.shape(c_cache)[0]
    c_q = x1 @ w["w_dq"]
    q_c = anp.split_heads(c_q @ w["w_uq"], n_heads)
    q_r = anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads), [t])
    c_cache = np.concatenate([np.asarray(c_cache, dtype=np.float32), x1 @ w["w_dkv"]])
    r_cache = np.concatenate([np.asarray(r_cache, dtype=np.float32), anp.apply_rope(x1 @ w["w_kr"], [t])])
    p = anp.softmax(absorbed_scores(q_c, q_r, c_cache, r_cache, w["w_uk"]), axis=-1)  # (h, 1, t + 1)
    latent = np.einsum("hqk,kl->hql", p, c_cache)
    heads = np.einsum("hql,lhd->qhd", latent, w["w_uv"].reshape(-1, n_heads, q_c.shape[-1]))
    return heads.reshape(-1) @ w["w_o"], c_cache, r_cache
