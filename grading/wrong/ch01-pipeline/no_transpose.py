# wrong: q @ k without transposing k (runs only when the shapes happen to be square, and is wrong then)
# caught by: test_scaled_scores test_attention
# severity: essential
# diagnosis: 没有转置 k
# %% scaled_scores
def scaled_scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    return q @ k / np.sqrt(q.shape[-1])
