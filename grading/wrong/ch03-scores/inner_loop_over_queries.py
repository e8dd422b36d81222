# wrong: the inner loop also runs over the queries (range(n_q)), right only when there are as many keys as queries
# caught by: test_scores_double_loop
# severity: essential
# diagnosis: 内层循环要遍历全部 n_k 个键
# %% scores_double_loop
def scores_double_loop(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    n = q.shape[0]
    s = np.zeros((n, k.shape[0]))
    for i in range(n):
        for j in range(n):
            s[i, j] = q[i] @ k[j]
    return s
