# wrong: divides the dot products by d_k instead of sqrt(d_k), so the variance becomes 1/d_k instead of 1
# caught by: test_scaled_scores
# severity: essential
# diagnosis: 而不是 d_k
# %% scaled_scores
def scaled_scores(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return q @ np.swapaxes(k, -1, -2) / q.shape[-1]
