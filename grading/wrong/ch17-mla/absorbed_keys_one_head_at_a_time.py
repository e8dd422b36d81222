# wrong: the scores are right, but each head's keys for the cached tokens are reconstructed in turn (one head's
# c_kv @ W_UK,i at a time): less memory than all heads at once, still no absorption
# caught by: test_absorbed_scores
# severity: essential
# diagnosis: 峰值内存小于一个头的键（4096 × 128 个 float64，4 MiB）：未通过
# %% absorbed_scores
def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):
    q_c, q_r, c_kv, k_r, w_uk = (np.asarray(a) for a in (q_c, q_r, c_kv, k_r, w_uk))
    h, d_head = q_c.shape[-3], q_c.shape[-1]
    heads = []
    for i in range(h):
        k_i = c_kv @ w_uk[:, i * d_head:(i + 1) * d_head]  # (..., n_k, d_head): head i's keys, one head at a time
        heads.append(q_c[..., i, :, :] @ np.swapaxes(k_i, -1, -2) + q_r[..., i, :, :] @ np.swapaxes(k_r, -1, -2))
    return np.stack(heads, axis=-3) / np.sqrt(d_head + q_r.shape[-1])
