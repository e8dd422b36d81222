# right: every group in a Python loop (codes with round() and min/max of a list); H2O's totals column by column
# over the visible rows, the softmax written with math.exp; KIVI by transposing each head; bytes counted in bits
# %% quantize
import math


def quantize(x, bits, group_size):
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    if d % group_size:
        raise ValueError("d 不是 group_size 的整数倍")
    rows = x.reshape(-1, d)
    codes = np.zeros(rows.shape, dtype=np.int64)
    scale = np.zeros((rows.shape[0], d // group_size))
    minimum = np.zeros_like(scale)
    for r in range(rows.shape[0]):
        for g in range(d // group_size):
            values = list(rows[r, g * group_size:(g + 1) * group_size])
            low, high = min(values), max(values)
            step = (high - low) / (2**bits - 1)
            scale[r, g], minimum[r, g] = step, low
            for i, value in enumerate(values):
                codes[r, g * group_size + i] = 0 if step == 0 else min(2**bits - 1, int(np.rint((value - low) / step)))
    return codes.reshape(x.shape), scale.reshape(x.shape[:-1] + (-1,)), minimum.reshape(x.shape[:-1] + (-1,))


def dequantize(codes, scale, minimum, group_size):
    codes = np.asarray(codes)
    out = np.zeros(codes.shape)
    for j in range(codes.shape[-1]):
        out[..., j] = codes[..., j] * scale[..., j // group_size] + minimum[..., j // group_size]
    return out
# %% h2o_keep
def h2o_keep(scores, budget, recent):
    if recent < 0 or recent > budget:
        raise ValueError("需要 0 ≤ recent ≤ budget")
    n = len(scores)
    if budget >= n:
        return np.arange(n)
    totals = [0.0] * n
    for i in range(n):
        top = max(scores[i][: i + 1])
        e = [math.exp(scores[i][j] - top) for j in range(i + 1)]
        for j in range(i + 1):
            totals[j] += e[j] / sum(e)
    older = list(range(n - recent))
    older.sort(key=lambda j: (totals[j], j), reverse=True)
    return np.array(sorted(older[: budget - recent] + list(range(n - recent, n))))
# %% kivi
def kivi_roundtrip(keys, values, bits, group_size):
    keys_hat = np.stack([dequantize(*quantize(head.T, bits, group_size), group_size).T for head in keys])
    values_hat = np.stack([dequantize(*quantize(head, bits, group_size), group_size) for head in values])
    return keys_hat, values_hat


def compressed_bytes(n_layers, n_kv_heads, n_tokens, d_head, bits, group_size):
    per_layer = 2 * n_kv_heads * n_tokens * d_head
    bits_total = n_layers * (per_layer * bits + per_layer // group_size * 2 * 16)
    return bits_total // 8
