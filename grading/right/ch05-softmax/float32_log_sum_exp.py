# right: computes in float32, through the log-sum-exp form, with its own exponent inside the temperature version
# %% softmax_stable
def softmax_stable(x, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    top = np.max(x, axis=axis, keepdims=True)
    log_total = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))
    return np.exp(x - top - log_total)
# %% softmax_temperature
def softmax_temperature(x, temperature, axis=-1):
    if temperature <= 0:
        raise ValueError(f"温度必须为正数，收到 {temperature}")
    z = np.asarray(x, dtype=np.float32) / np.float32(temperature)
    e = np.exp(z - np.max(z, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    x = np.asarray(x, dtype=np.float32)
    mask = np.broadcast_to(mask, x.shape)
    top = np.max(np.where(mask, x, np.float32(-np.inf)), axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, np.float32(0))
    e = np.where(mask, np.exp(np.where(mask, x - top, np.float32(0))), np.float32(0))
    total = e.sum(axis=axis, keepdims=True)
    return e / np.where(total > 0, total, np.float32(1))
