# wrong: normalises over the queries (axis=-2), so each key's column sums to 1 instead of each query's row
# caught by: test_attention_matrix
# severity: essential
# diagnosis: 沿键的方向
# %% attention_matrix
def attention_matrix(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - np.max(s, axis=-2, keepdims=True))
    return (e / np.sum(e, axis=-2, keepdims=True)) @ v
