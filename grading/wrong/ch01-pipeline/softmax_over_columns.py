# wrong: normalises each column (axis=0) instead of each row: the weights of one query do not sum to 1
# caught by: test_attention
# severity: essential
# diagnosis: 沿键的方向
# %% attention
def attention(q, k, v):
    s = scaled_scores(q, k)
    e = np.exp(s - np.max(s, axis=0, keepdims=True))
    weights = e / np.sum(e, axis=0, keepdims=True)
    return weights @ v, weights
