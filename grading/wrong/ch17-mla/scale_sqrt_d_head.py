# wrong: the scores divided by sqrt(d_head), the width of one head, instead of sqrt(d_head + d_rope)
# caught by: test_mla_attention
# severity: essential
# diagnosis: 分数除以了 √d_head
# %% mla_attention
def mla_attention(x, weights, n_heads):
    x = np.asarray(x)
    w = weights
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    q_c = anp.split_heads(c_q @ w["w_uq"], n_heads)
    q_r = anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads))
    k_c = anp.split_heads(c_kv @ w["w_uk"], n_heads)
    v_c = anp.split_heads(c_kv @ w["w_uv"], n_heads)
    k_r = anp.apply_rope(x @ w["w_kr"])[..., None, :, :]
    d_head = q_c.shape[-1]
    scores = (q_c @ np.swapaxes(k_c, -1, -2) + q_r @ np.swapaxes(k_r, -1, -2)) / np.sqrt(d_head)
    p = anp.softmax(scores, axis=-1, mask=anp.causal_mask(x.shape[-2]))
    return anp.merge_heads(p @ v_c) @ w["w_o"]
