# right: float32 throughout, the angles too; each position's d × d block-diagonal rotation matrix built and applied
# as a matrix product; the bias from np.tril of the distances; the decoding step with the student's own rope
# %% rope
def rope(x, positions=None, base=10000.0):
    x = np.asarray(x, dtype=np.float32)
    n, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError("d 必须是偶数")
    pos = range(n) if positions is None else positions
    out = np.empty_like(x)
    for row, p in enumerate(pos):
        r = np.zeros((d, d), dtype=np.float32)
        for i in range(d // 2):
            th = np.float32(p) * np.float32(base) ** np.float32(-2 * i / d)  # 角度也是 float32
            c, s = np.cos(th), np.sin(th)
            r[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
        out[..., row, :] = x[..., row, :] @ r.T
    return out


# %% alibi
def alibi(n_q, n_k, n_heads):
    slopes = np.float32(2.0) ** (-np.float32(8.0) * np.arange(1, n_heads + 1, dtype=np.float32) / n_heads)
    distance = (np.arange(n_q)[:, None] + (n_k - n_q) - np.arange(n_k)).astype(np.float32)
    distance = np.tril(distance, k=n_k - n_q)  # 未来的键：0
    return -slopes[:, None, None] * distance


# %% rope_decode_step
def rope_decode_step(q, k, v, keys, values):
    t, t_new = keys.shape[-2], q.shape[-2]
    where = np.arange(t, t + t_new)
    q32 = rope(np.asarray(q, dtype=np.float32), where)
    new_keys = np.concatenate([np.asarray(keys, dtype=np.float32), rope(k, where)], axis=-2)
    new_values = np.concatenate([np.asarray(values, dtype=np.float32), np.asarray(v, dtype=np.float32)], axis=-2)
    scores = q32 @ np.swapaxes(new_keys, -1, -2) / np.float32(np.sqrt(q32.shape[-1]))
    weights = anp.softmax(scores, mask=anp.causal_mask(t_new, t + t_new))
    return weights @ new_values, new_keys, new_values
