# wrong: computes its own q @ k.T instead of calling scaled_scores, and forgets to divide by sqrt(d_k)
# caught by: test_attention
# severity: essential
# diagnosis: 没有缩放的分数
# %% attention
def attention(q, k, v):
    s = q @ k.T
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    weights = e / np.sum(e, axis=-1, keepdims=True)
    return weights @ v, weights
