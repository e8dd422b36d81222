# right: the rotation as complex multiplication (each pair a complex number times exp(i·θ)); the bias in loops over
# heads, queries and keys; the decoding step with einsum and its own softmax over the allowed keys
# %% rope
def rope(x, positions=None, base=10000.0):
    x = np.asarray(x, dtype=float)
    n, d = x.shape[-2:]
    if d % 2 == 1:
        raise ValueError(f"d = {d}：特征数必须是偶数")
    pos = np.arange(n, dtype=float) if positions is None else np.asarray(positions, dtype=float)
    z = x[..., 0::2] + 1j * x[..., 1::2]  # 每一对看成一个复数
    turned = z * np.exp(1j * np.outer(pos, base ** (-2.0 * np.arange(d // 2) / d)))
    out = np.stack([turned.real, turned.imag], axis=-1)  # (..., n, d/2, 2)
    return out.reshape(x.shape)


# %% alibi
def alibi(n_q, n_k, n_heads):
    bias = np.zeros((n_heads, n_q, n_k))
    for h in range(n_heads):
        slope = 2.0 ** (-8.0 * (h + 1) / n_heads)
        for i in range(n_q):
            at = n_k - n_q + i
            for j in range(n_k):
                bias[h, i, j] = -slope * abs(at - j)
    return bias


# %% rope_decode_step
def rope_decode_step(q, k, v, keys, values):
    t, t_new, d = keys.shape[-2], q.shape[-2], q.shape[-1]
    where = np.arange(t, t + t_new)
    q_rot = anp.apply_rope(np.asarray(q, dtype=float), where)
    all_k = np.concatenate([keys, anp.apply_rope(np.asarray(k, dtype=float), where)], axis=-2)
    all_v = np.concatenate([values, v], axis=-2)
    s = np.einsum("...id,...jd->...ij", q_rot, all_k) / np.sqrt(d)
    allowed = np.arange(t + t_new)[None, :] <= np.arange(t_new)[:, None] + t
    s = np.where(allowed, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    w = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...jd->...id", w, all_v), all_k, all_v
