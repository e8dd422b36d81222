# wrong: attention_loop computes every query at once (the matrix form) and never calls attention_row
# caught by: test_attention_loop
# severity: essential
# diagnosis: 一次也没有调用 attention_row
# %% attention_loop
def attention_row(q_i, k, v):
    q_i, k, v = (np.asarray(a, dtype=float) for a in (q_i, k, v))
    s = k @ q_i / np.sqrt(q_i.shape[-1])
    e = np.exp(s - np.max(s))
    return (e / np.sum(e)) @ v


def attention_loop(q, k, v):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[-1])
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)) @ v
