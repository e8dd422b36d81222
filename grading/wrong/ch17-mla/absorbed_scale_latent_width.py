# wrong: absorbed, but scaled by the width of the absorbed vectors, sqrt(d_latent + d_rope), not sqrt(d_head + d_rope)
# caught by: test_absorbed_scores
# severity: essential
# diagnosis: 分数除以了 √(d_latent + d_rope)
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r, w_uk = (np.asarray(a) for a in (q_c, q_r, c_kv, k_r, w_uk))
    h, d_head = q_c.shape[-3], q_c.shape[-1]
    w_heads = w_uk.reshape(w_uk.shape[0], h, d_head).transpose(1, 0, 2)
    q_latent = q_c @ np.swapaxes(w_heads, -1, -2)  # (..., h, n_q, d_latent)
    q_all = np.concatenate([q_latent, q_r], axis=-1)  # (..., h, n_q, d_latent + d_rope)
    k_all = np.concatenate([c_kv, k_r], axis=-1)[..., None, :, :]  # (..., 1, n_k, d_latent + d_rope)
    return q_all @ np.swapaxes(k_all, -1, -2) / np.sqrt(q_all.shape[-1])
