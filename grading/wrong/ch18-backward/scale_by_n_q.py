# wrong: the scale is taken from the number of queries, 1/sqrt(q.shape[-2]), instead of the width d = q.shape[-1]:
# right only when n_q happens to equal d
# caught by: test_attention_backward
# severity: essential
# diagnosis: 缩放用的是 √n_q（查询的个数）而不是 √d
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, d_out))
    scale = 1.0 / np.sqrt(q.shape[-2])
    p = anp.softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)
    out = p @ v
    dv = np.swapaxes(p, -1, -2) @ d_out
    dp = d_out @ np.swapaxes(v, -1, -2)
    delta = np.sum(d_out * out, axis=-1, keepdims=True)
    ds = p * (dp - delta)
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv
