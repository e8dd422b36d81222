# wrong: divides by the square root of the number of queries (q.shape[-2]) instead of d_k (q.shape[-1])
# caught by: test_scaled_scores
# severity: essential
# diagnosis: 序列长度的平方根
# %% scaled_scores
def scaled_scores(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-2])
