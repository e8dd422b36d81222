# wrong: exponentiates the raw scores without subtracting the maximum, so scores in the thousands overflow to nan
# caught by: test_attention_loop
# severity: essential
# diagnosis: 个 NaN（期望里没有）
# %% attention_loop
def attention_row(q_i, k, v):
    q_i, k, v = (np.asarray(a, dtype=float) for a in (q_i, k, v))
    e = np.exp(k @ q_i / np.sqrt(q_i.shape[-1]))
    return (e / np.sum(e)) @ v


def attention_loop(q, k, v):
    q, v = np.asarray(q, dtype=float), np.asarray(v, dtype=float)
    out = np.empty((q.shape[0], v.shape[-1]))
    for i in range(q.shape[0]):
        out[i] = attention_row(q[i], k, v)
    return out
