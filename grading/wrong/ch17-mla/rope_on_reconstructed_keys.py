# wrong: RoPE applied to the content queries and to the keys reconstructed from the latent, as in chapter 15
# caught by: test_mla_attention
# severity: essential
# diagnosis: 也加了 RoPE
# %% mla_attention
def mla_attention(x, weights, n_heads):
    x = np.asarray(x)
    w = weights
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    q_c = anp.apply_rope(anp.split_heads(c_q @ w["w_uq"], n_heads))
    q_r = anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads))
    k_c = anp.apply_rope(anp.split_heads(c_kv @ w["w_uk"], n_heads))
    v_c = anp.split_heads(c_kv @ w["w_uv"], n_heads)
    k_r = anp.apply_rope(x @ w["w_kr"])[..., None, :, :]
    scores = (q_c @ np.swapaxes(k_c, -1, -2) + q_r @ np.swapaxes(k_r, -1, -2)) / np.sqrt(
        q_c.shape[-1] + q_r.shape[-1])
    p = anp.softmax(scores, axis=-1, mask=anp.causal_mask(x.shape[-2]))
    return anp.merge_heads(p @ v_c) @ w["w_o"]
