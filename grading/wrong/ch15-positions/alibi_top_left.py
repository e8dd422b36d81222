# wrong: query i placed at position i (top-left aligned), right only when n_q == n_k
# caught by: test_alibi
# severity: essential
# diagnosis: 对齐到了左上角
# %% alibi
def alibi(n_q, n_k, n_heads):
    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)
    distance = np.arange(n_q)[:, None] - np.arange(n_k)
    return -slopes[:, None, None] * np.abs(distance)
