# wrong: dQ = dS K without the 1/sqrt(d) of the scores (dK keeps it)
# caught by: test_attention_backward
# severity: essential
# diagnosis: dQ 大了 √d 倍
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, d_out))
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = anp.softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)
    out = p @ v
    dv = np.swapaxes(p, -1, -2) @ d_out
    delta = np.sum(d_out * out, axis=-1, keepdims=True)
    ds = p * (d_out @ np.swapaxes(v, -1, -2) - delta)
    return ds @ k, np.swapaxes(ds, -1, -2) @ q * scale, dv
