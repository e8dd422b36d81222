# right: heads cut out as column slices and stacked, merged by concatenation; attention with einsum and its own
#   masked softmax; parameters counted from the list of matrix and vector shapes
# %% split_merge
def split_heads(x, n_heads):
    x = np.asarray(x)
    d_model = x.shape[-1]
    if d_model % n_heads != 0:
        raise ValueError(f"{n_heads} 个头分不了宽度 {d_model}")
    d_head = d_model // n_heads
    return np.stack([x[..., i * d_head:(i + 1) * d_head] for i in range(n_heads)], axis=-3)


def merge_heads(x):
    x = np.asarray(x)
    return np.concatenate([x[..., i, :, :] for i in range(x.shape[-3])], axis=-1)
# %% multi_head_attention
def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    x_q, x_kv = np.asarray(x_q, dtype=float), np.asarray(x_kv, dtype=float)
    q = split_heads(np.einsum("...nd,de->...ne", x_q, w_q), n_heads)
    k = split_heads(np.einsum("...nd,de->...ne", x_kv, w_k), n_heads)
    v = split_heads(np.einsum("...nd,de->...ne", x_kv, w_v), n_heads)
    scores = np.einsum("...hid,...hjd->...hij", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape, dtype=bool)
    if mask is not None:
        allowed = allowed & np.expand_dims(np.asarray(mask, dtype=bool), -3)
    masked = np.where(allowed, scores, -np.inf)
    top = masked.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(allowed, np.exp(masked - top), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    weights = e / np.where(total > 0, total, 1.0)
    heads = np.einsum("...hij,...hjd->...hid", weights, v)
    return np.einsum("...ne,ed->...nd", merge_heads(heads), w_o), weights
# %% count_parameters
def count_parameters(d_model, n_heads, d_head=None, *, bias=False):
    if d_head is None:
        if d_model % n_heads != 0:
            raise ValueError(f"{n_heads} 个头分不了宽度 {d_model}")
        d_head = d_model // n_heads
    inner = n_heads * d_head
    shapes = [(d_model, inner), (d_model, inner), (d_model, inner), (inner, d_model)]  # W_Q, W_K, W_V, W_O
    if bias:
        shapes += [(inner,), (inner,), (inner,), (d_model,)]  # b_Q, b_K, b_V, b_O
    return sum(int(np.prod(shape)) for shape in shapes)
