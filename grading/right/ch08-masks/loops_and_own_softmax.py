# right: masks built with loops and comprehensions, attention with einsum and its own masked softmax
# %% causal_mask
def causal_mask(n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    shift = n_k - n_q
    return np.array([[j <= i + shift for j in range(n_k)] for i in range(n_q)], dtype=bool).reshape(n_q, n_k)
# %% padding_mask
def padding_mask(lengths, n_k):
    lengths = list(lengths)
    mask = np.zeros((len(lengths), 1, n_k), dtype=bool)
    for b, length in enumerate(lengths):
        for j in range(min(int(length), n_k)):
            mask[b, 0, j] = True
    return mask
# %% decoder_mask
def decoder_mask(lengths, n_q, n_k=None):
    if n_k is None:
        n_k = n_q
    return np.logical_and(causal_mask(n_q, n_k), padding_mask(lengths, n_k))
# %% masked_attention
def masked_attention(q, k, v, mask=None, causal=False):
    q, k, v = np.asarray(q, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    n_q, n_k, d_k = q.shape[-2], k.shape[-2], q.shape[-1]
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d_k)
    allowed = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        allowed = allowed & np.asarray(mask, dtype=bool)
    if causal:
        allowed = allowed & causal_mask(n_q, n_k)
    masked = np.where(allowed, scores, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    top[~np.isfinite(top)] = 0.0  # a row with every key masked
    e = np.where(allowed, np.exp(masked - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    return np.einsum("...ij,...jd->...id", weights, v), weights
# %% cross_attention
def cross_attention(x_dec, memory, memory_lengths, w_q, w_k, w_v):
    q = np.einsum("bnd,de->bne", np.asarray(x_dec, dtype=float), w_q)
    k = np.einsum("bnd,de->bne", np.asarray(memory, dtype=float), w_k)
    v = np.einsum("bnd,de->bne", np.asarray(memory, dtype=float), w_v)
    keys_ok = padding_mask(memory_lengths, k.shape[1])
    return masked_attention(q, k, v, mask=keys_ok)
