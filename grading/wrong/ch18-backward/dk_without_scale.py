# wrong: dK = dS^T Q without the 1/sqrt(d) of the scores (dQ keeps it)
# caught by: test_attention_backward
# severity: essential
# diagnosis: dK 大了 √d 倍
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, d_out))
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = anp.softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)
    dv = np.swapaxes(p, -1, -2) @ d_out
    delta = np.sum(d_out * (p @ v), axis=-1, keepdims=True)
    ds = p * (d_out @ np.swapaxes(v, -1, -2) - delta)
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q, dv
