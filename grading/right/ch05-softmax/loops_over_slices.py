# right: moves the axis to the end and loops over the slices with Python lists and math.exp
# %% softmax_stable
import math


def _one_slice(values, keep=None):
    keep = [True] * len(values) if keep is None else list(keep)
    allowed = [v for v, k in zip(values, keep, strict=True) if k]
    if not allowed:
        return [0.0] * len(values)
    top = max(allowed)
    exps = [math.exp(v - top) if k and v != -math.inf else 0.0 for v, k in zip(values, keep, strict=True)]
    total = sum(exps)
    return [e / total for e in exps]


def _by_slices(x, axis, mask=None):
    x = np.asarray(x, dtype=float)
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    keep = None
    if mask is not None:
        keep = np.moveaxis(np.broadcast_to(mask, x.shape), axis, -1).reshape(flat.shape)
    out = np.array([_one_slice(list(row), None if keep is None else keep[i]) for i, row in enumerate(flat)])
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


def softmax_stable(x, axis=-1):
    return _by_slices(x, axis)
# %% softmax_temperature
def softmax_temperature(x, temperature, axis=-1):
    if isinstance(temperature, (int, float)) and temperature > 0:
        return _by_slices(np.asarray(x, dtype=float) / temperature, axis)
    raise ValueError("温度要大于 0")
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    return _by_slices(x, axis, mask)
