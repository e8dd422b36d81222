# wrong: divides the dot products by d_k instead of sqrt(d_k): the weights come out too flat
# caught by: test_scaled_scores test_attention
# severity: essential
# diagnosis: 除以的是 d_k 而不是 √d_k
# %% scaled_scores
def scaled_scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    return q @ k.T / q.shape[-1]
