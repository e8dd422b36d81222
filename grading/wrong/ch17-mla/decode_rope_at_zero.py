# wrong: the new token's rope query and rope key rotated at position 0 (apply_rope's default), not at t
# caught by: test_decode_step
# severity: essential
# diagnosis: RoPE 查询和 RoPE 键都按位置 0 旋转了
# %% decode_step
def decode_step(x_new, weights, n_heads, c_cache, r_cache):
    w = weights
    x1 = np.asarray(x_new)[None, :]
    c_q = x1 @ w["w_dq"]
    q_c = anp.split_heads(c_q @ w["w_uq"], n_heads)
    q_r = anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads))  # 位置 0
    c_cache = np.concatenate([c_cache, x1 @ w["w_dkv"]])
    r_cache = np.concatenate([r_cache, anp.apply_rope(x1 @ w["w_kr"])])  # 位置 0
    p = anp.softmax(absorbed_scores(q_c, q_r, c_cache, r_cache, w["w_uk"]), axis=-1)
    w_uv = w["w_uv"].reshape(-1, n_heads, q_c.shape[-1]).transpose(1, 0, 2)
    return (anp.merge_heads((p @ c_cache) @ w_uv) @ w["w_o"])[0], c_cache, r_cache
