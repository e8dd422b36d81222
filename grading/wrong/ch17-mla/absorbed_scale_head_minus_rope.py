# wrong: absorbed, but scaled by sqrt(d_head - d_rope); no mistake model names it (where d_head - d_rope equalled
# d_latent + d_rope the old hint called it the latent width): the check reports what it observed
# caught by: test_absorbed_scores
# severity: essential
# diagnosis: 30 / 30 个数不一致
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r, w_uk = (np.asarray(a) for a in (q_c, q_r, c_kv, k_r, w_uk))
    h, d_head = q_c.shape[-3], q_c.shape[-1]
    w_heads = w_uk.reshape(w_uk.shape[0], h, d_head).transpose(1, 0, 2)
    content = (q_c @ np.swapaxes(w_heads, -1, -2)) @ np.swapaxes(c_kv, -1, -2)[..., None, :, :]
    position = q_r @ np.swapaxes(k_r, -1, -2)[..., None, :, :]
    return (content + position) / np.sqrt(d_head - q_r.shape[-1])
