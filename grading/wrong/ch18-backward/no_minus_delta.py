# wrong: dS = P * dP: the row term D = rowsum(dO * O) is not subtracted (dV stays right, dQ and dK do not)
# caught by: test_attention_backward
# severity: essential
# diagnosis: 忘了减去每行的 D
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, d_out))
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = anp.softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)
    dv = np.swapaxes(p, -1, -2) @ d_out
    ds = p * (d_out @ np.swapaxes(v, -1, -2))  # the softmax backward without its row term
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv
