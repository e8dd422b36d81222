# wrong: the slopes in the opposite order, the flattest head first (1/256, ..., 1/2)
# caught by: test_alibi
# severity: essential
# diagnosis: 斜率的顺序反了
# %% alibi
def alibi(n_q, n_k, n_heads):
    slopes = 2.0 ** (-8.0 * np.arange(n_heads, 0, -1) / n_heads)
    at = np.arange(n_q) + (n_k - n_q)
    return -slopes[:, None, None] * np.maximum(at[:, None] - np.arange(n_k), 0)
