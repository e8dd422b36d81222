# wrong: one maximum per block (no axis=1) shared by all rows: a row far below another underflows to 0 / 0
# caught by: test_tiled_attention
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% tiled_attention
def tiled_attention(q, k, v, block_size, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k = len(q), len(k)
    q = q / np.sqrt(q.shape[-1])
    m = np.full((n_q, 1), -np.inf)
    total = np.zeros((n_q, 1))
    acc = np.zeros((n_q, v.shape[-1]))
    for start in range(0, n_k, block_size):
        cols = np.arange(start, min(start + block_size, n_k))
        s = q @ k[cols].T
        if causal:
            s[cols[None, :] > np.arange(n_q)[:, None]] = -np.inf
        m_new = np.maximum(m, s.max())
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        p = np.exp(s - shift)
        rescale = np.exp(m - shift)
        total = total * rescale + p.sum(axis=1, keepdims=True)
        acc = acc * rescale + p @ v[cols]
        m = m_new
    return acc / total
