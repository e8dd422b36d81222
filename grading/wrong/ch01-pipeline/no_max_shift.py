# wrong: exponentiates the scores without subtracting the row maximum: right on small scores, nan once they overflow
# caught by: test_attention
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% attention
def attention(q, k, v):
    e = np.exp(scaled_scores(q, k))
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights
