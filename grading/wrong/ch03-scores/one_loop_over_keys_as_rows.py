# wrong: loops over the keys and stacks q @ k_j as rows, so the result is S transposed, shape (n_k, n_q)
# caught by: test_scores_one_loop
# severity: essential
# diagnosis: 结果是 S 的转置
# %% scores_one_loop
def scores_one_loop(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return np.array([q @ k[j] for j in range(k.shape[0])])
