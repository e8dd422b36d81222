# wrong: the query is rotated at t, but the new rope key is cached unrotated (as at position 0)
# caught by: test_decode_step
# severity: essential
# diagnosis: RoPE 查询在位置 t 旋转了，RoPE 键却没有
# %% decode_step
def decode_step(x_new, weights, n_heads, c_cache, r_cache):
    w = weights
    x1 = np.asarray(x_new)[None, :]
    t = len(c_cache)
    c_q = x1 @ w["w_dq"]
    q_c = anp.split_heads(c_q @ w["w_uq"], n_heads)
    q_r = anp.apply_rope(anp.split_heads(c_q @ w["w_qr"], n_heads), np.array([t]))
    c_cache = np.concatenate([c_cache, x1 @ w["w_dkv"]])
    r_cache = np.concatenate([r_cache, x1 @ w["w_kr"]])  # 忘了旋转
    p = anp.softmax(absorbed_scores(q_c, q_r, c_cache, r_cache, w["w_uk"]), axis=-1)
    w_uv = w["w_uv"].reshape(-1, n_heads, q_c.shape[-1]).transpose(1, 0, 2)
    return (anp.merge_heads((p @ c_cache) @ w_uv) @ w["w_o"])[0], c_cache, r_cache
