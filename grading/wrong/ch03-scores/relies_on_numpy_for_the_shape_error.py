# wrong: no d_k check of its own; NumPy's matmul still raises a ValueError, but its message names neither shape
# caught by: test_scores_double_loop
# severity: edge
# diagnosis: d_k 不同时，错误信息写出两个形状 (2, 3) 与 (4, 2)：未通过
# %% scores_double_loop
def scores_double_loop(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    s = np.zeros((q.shape[0], k.shape[0]))
    for i in range(q.shape[0]):
        for j in range(k.shape[0]):
            s[i, j] = q[i] @ k[j]
    return s
