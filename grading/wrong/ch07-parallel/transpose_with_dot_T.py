# wrong: transposes k with .T, which reverses every axis: right for one sequence, wrong (or failing) with batch axes
# caught by: test_attention_matrix
# severity: edge
# diagnosis: .T 会把所有维度倒过来
# %% attention_matrix
def attention_matrix(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)) @ v
