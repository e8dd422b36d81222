# wrong: no causal mask: every token attends to the tokens after it too
# caught by: test_mla_attention
# severity: essential
# diagnosis: 没有加因果掩码
# %% mla_attention
def mla_attention(x, weights, n_heads):
    x = np.asarray(x)
    w = weights
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    q = np.concatenate([anp.split_heads(c_q @ w["w_uq"], n_heads),
                        anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads))], axis=-1)
    k_c = anp.split_heads(c_kv @ w["w_uk"], n_heads)
    k_r = np.broadcast_to(anp.apply_rope(x @ w["w_kr"])[..., None, :, :], k_c.shape[:-1] + (w["w_kr"].shape[1],))
    k = np.concatenate([k_c, k_r], axis=-1)
    out, _ = anp.scaled_dot_product_attention(q, k, anp.split_heads(c_kv @ w["w_uv"], n_heads))
    return anp.merge_heads(out) @ w["w_o"]
