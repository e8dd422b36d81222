# wrong: answers the two-loop exercise with one matrix product: the numbers are right, the pairwise loops are not there
# caught by: test_scores_double_loop
# severity: essential
# diagnosis: 0 个 for 循环
# %% scores_double_loop
def scores_double_loop(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return q @ k.T
