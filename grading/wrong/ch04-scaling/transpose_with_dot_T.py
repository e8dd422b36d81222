# wrong: q @ k.T, which reverses every axis of a batched k instead of swapping the last two (right for 2-D only)
# caught by: test_scaled_scores
# severity: essential
# diagnosis: 调用时抛出了异常 ValueError
# %% scaled_scores
def scaled_scores(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return q @ k.T / np.sqrt(q.shape[-1])
