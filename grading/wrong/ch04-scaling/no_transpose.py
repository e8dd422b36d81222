# wrong: q @ k without transposing k; it runs only on square inputs (n_k = d_k), and there it pairs the wrong numbers
# caught by: test_scaled_scores
# severity: essential
# diagnosis: k 没有转置
# %% scaled_scores
def scaled_scores(q, k):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：{q.shape} 与 {k.shape}")
    return q @ k / np.sqrt(q.shape[-1])
