# right: vectorized with reshape; codes rounded half up (np.floor(t + 0.5)) instead of np.rint, np.divide(where=)
# for constant groups; H2O's ties broken by a stable sort of the reversed candidates; KIVI by np.moveaxis; bytes
# counted in bits
# %% quantize
def quantize(x, bits, group_size):
    x = np.asarray(x)
    *lead, d = x.shape
    if d % group_size != 0:
        raise ValueError("最后一维的长度必须是 group_size 的整数倍")
    g = x.reshape(*lead, d // group_size, group_size)
    lo = g.min(axis=-1, keepdims=True)
    hi = g.max(axis=-1, keepdims=True)
    step = (hi - lo) / (2 ** bits - 1)
    q = np.floor(np.divide(g - lo, step, out=np.zeros_like(g), where=step > 0) + 0.5)
    q = np.clip(q, 0, 2**bits - 1).astype(np.int64)
    return q.reshape(x.shape), step[..., 0], lo[..., 0]


def dequantize(codes, scale, minimum, group_size):
    codes = np.asarray(codes)
    g = codes.reshape(*codes.shape[:-1], -1, group_size)
    return (g * scale[..., None] + minimum[..., None]).reshape(codes.shape)


# %% h2o_keep
def h2o_keep(scores, budget, recent):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    if recent < 0 or recent > budget:
        raise ValueError("recent 必须在 0 到 budget 之间")
    if budget >= n:
        return np.arange(n)
    masked = scores.copy()
    masked[np.triu_indices(n, 1)] = -np.inf
    masked -= masked.max(axis=1, keepdims=True)
    w = np.exp(masked)
    w /= w.sum(axis=1, keepdims=True)
    acc = w.sum(axis=0)
    rev = np.arange(n - recent)[::-1]  # newest first: the stable sort then keeps the newer of equal totals
    order = rev[np.argsort(-acc[rev], kind="stable")]
    return np.sort(np.concatenate([order[:budget - recent], np.arange(n - recent, n)]))


# %% kivi
def kivi_roundtrip(keys, values, bits, group_size):
    kt = np.moveaxis(keys, -2, -1)  # (h, d, n)
    k_hat = np.moveaxis(dequantize(*quantize(kt, bits, group_size), group_size), -1, -2)
    v_hat = dequantize(*quantize(values, bits, group_size), group_size)
    return k_hat, v_hat


def compressed_bytes(n_layers, n_kv_heads, n_tokens, d_head, bits, group_size):
    per_tensor = n_layers * n_kv_heads * n_tokens * d_head
    total_bits = 0
    for _ in ("keys", "values"):
        total_bits += per_tensor * bits + (per_tensor // group_size) * (16 + 16)
    return total_bits // 8
