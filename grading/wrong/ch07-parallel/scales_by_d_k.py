# wrong: divides each query's scores by d_k instead of sqrt(d_k)
# caught by: test_attention_loop
# severity: essential
# diagnosis: 缩放因子是 1/√d_k，不是 1/d_k
# %% attention_loop
def attention_row(q_i, k, v):
    q_i, k, v = (np.asarray(a, dtype=float) for a in (q_i, k, v))
    s = k @ q_i / q_i.shape[-1]
    e = np.exp(s - np.max(s))
    return (e / np.sum(e)) @ v


def attention_loop(q, k, v):
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    out = np.empty((q.shape[0], v.shape[-1]))
    for i in range(q.shape[0]):
        out[i] = attention_row(q[i], k, v)
    return out
