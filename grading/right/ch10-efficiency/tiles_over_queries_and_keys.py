# right: tiles over queries and keys (a block of each), einsum, np.where for causal
# %% tiled_attention
def tiled_attention(q, k, v, block_size, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k, d_k = len(q), len(k), q.shape[1]
    out = np.empty((n_q, v.shape[1]))
    for r0 in range(0, n_q, block_size):  # a block of queries at a time, too
        rows = slice(r0, min(r0 + block_size, n_q))
        qb = q[rows] / math.sqrt(d_k)
        m = np.full(len(qb), -np.inf)
        total = np.zeros(len(qb))
        acc = np.zeros((len(qb), v.shape[1]))
        for c0 in range(0, n_k, block_size):
            c1 = min(c0 + block_size, n_k)
            s = np.einsum("id,jd->ij", qb, k[c0:c1])
            if causal:
                s = np.where(np.arange(c0, c1)[None, :] > np.arange(r0, r0 + len(qb))[:, None], -np.inf, s)
            m_new = np.maximum(m, s.max(axis=1))
            safe = np.where(m_new == -np.inf, 0.0, m_new)
            p = np.exp(s - safe[:, None])
            scale = np.exp(m - safe)
            total = total * scale + p.sum(axis=1)
            acc = acc * scale[:, None] + p @ v[c0:c1]
            m = m_new
        out[rows] = acc / total[:, None]
    return out
