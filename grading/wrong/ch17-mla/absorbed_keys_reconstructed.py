# wrong: the scores are right, but every cached token's keys are reconstructed per head (c_kv @ w_uk): no absorption
# caught by: test_absorbed_scores
# severity: essential
# diagnosis: 峰值内存小于一个头的键（4096 × 128 个 float64，4 MiB）：未通过
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r = (np.asarray(a) for a in (q_c, q_r, c_kv, k_r))
    h = q_c.shape[-3]
    k_c = anp.split_heads(c_kv @ w_uk, h)  # (..., h, n_k, d_head)
    scores = q_c @ np.swapaxes(k_c, -1, -2) + q_r @ np.swapaxes(k_r, -1, -2)[..., None, :, :]
    return scores / np.sqrt(q_c.shape[-1] + q_r.shape[-1])
