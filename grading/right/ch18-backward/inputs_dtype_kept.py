# right: the inputs' dtype kept (no cast to float64): with float32 inputs the scores q kᵀ are a float32 product and
# the float64 scale 1/√d (a NumPy scalar) makes the rest float64, so the gradients come back as float64 arrays that
# are only as precise as float32
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x) for x in (q, k, v, d_out))
    scale = 1.0 / np.sqrt(q.shape[-1])
    p = anp.softmax(q @ np.swapaxes(k, -1, -2) * scale, axis=-1)
    out = p @ v
    dv = np.swapaxes(p, -1, -2) @ d_out
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(d_out * out, axis=-1, keepdims=True))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv
