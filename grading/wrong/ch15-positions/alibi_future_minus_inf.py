# wrong: the mask folded into the bias (-inf for future keys): the bias is no longer finite
# caught by: test_alibi
# severity: edge
# diagnosis: 偏置里不要填 −inf
# %% alibi
def alibi(n_q, n_k, n_heads):
    slopes = 2.0 ** (-8.0 * np.arange(1, n_heads + 1) / n_heads)
    distance = (np.arange(n_q) + (n_k - n_q))[:, None] - np.arange(n_k)
    bias = -slopes[:, None, None] * distance.astype(float)
    return np.where(distance >= 0, bias, -np.inf)
