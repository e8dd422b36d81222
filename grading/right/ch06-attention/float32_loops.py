# right: float32, one query row at a time in a loop over np.ndindex (batch axes included); nan_to_num for empty rows
# %% scaled_dot_product_attention
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError("q 的形状 " + str(q.shape) + " 与 k 的形状 " + str(k.shape) + " 的最后一维不同")
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    n_q, n_k = q.shape[-2], k.shape[-2]
    if mask is None:
        mask = np.ones((n_q, n_k), dtype=bool)
    mask = np.broadcast_to(mask, batch + (n_q, n_k))
    q = np.broadcast_to(q, batch + q.shape[-2:])
    k = np.broadcast_to(k, batch + k.shape[-2:])
    v = np.broadcast_to(v, batch + v.shape[-2:])
    weights = np.zeros(batch + (n_q, n_k), dtype=np.float32)
    output = np.zeros(batch + (n_q, v.shape[-1]), dtype=np.float32)
    scale = np.float32(1 / np.sqrt(q.shape[-1]))
    for b in np.ndindex(*batch):
        for i in range(n_q):
            s = (k[b] @ q[b][i]) * scale
            s = np.where(mask[b][i], s, -np.inf)
            with np.errstate(invalid="ignore"):
                e = np.nan_to_num(np.exp(s - s.max()), nan=0.0)
            if e.sum() > 0:
                weights[b][i] = e / e.sum()
            output[b][i] = weights[b][i] @ v[b]
    return output, weights


# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        rng = np.random.default_rng(seed)
        std = 1.0 / np.sqrt(d_model)
        self.w_q = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_k = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_v = rng.normal(0.0, std, size=(d_model, d_k if d_v is None else d_v))

    def forward(self, x, mask=None):
        q, k, v = anp.qkv_projection(x, self.w_q, self.w_k, self.w_v)
        output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return output, weights


# %% permutation_gaps
def permutation_gaps(layer, x, perm):
    gaps = []
    first, second = layer.forward(x), layer.forward(np.array([x[i] for i in perm]))
    for before, after, both in zip(first, second, (False, True), strict=True):
        moved = before[perm][:, perm] if both else before[perm]
        gaps.append(float(np.max(np.abs(after - moved))))
    return tuple(gaps)
