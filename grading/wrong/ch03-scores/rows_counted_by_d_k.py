# wrong: sizes the score matrix and the loop by q.shape[1] (d_k) instead of q.shape[0] (n_q): right only when there
# are as many queries as features, an IndexError (or rows of zeros) otherwise
# caught by: test_scores_one_loop
# severity: essential
# diagnosis: IndexError
# %% scores_one_loop
def scores_one_loop(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    s = np.zeros((q.shape[1], k.shape[0]))
    for i in range(q.shape[1]):
        s[i] = k @ q[i]
    return s
