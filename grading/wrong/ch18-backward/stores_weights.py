# wrong: the whole n x n weights recomputed from lse and kept; the loops read its blocks (right values, O(n^2) memory)
# caught by: test_tiled_backward
# severity: essential
# diagnosis: 存下 n×n 的权重时多出 24 MiB 以上）：未通过
# %% tiled_backward
def tiled_backward(q, k, v, out, lse, d_out, block_size, causal=False):
    q, k, v, out, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, out, d_out))
    lse = np.asarray(lse, dtype=float)
    n_q, n_k = len(q), len(k)
    scale = 1.0 / np.sqrt(q.shape[-1])
    s = q @ k.T * scale  # (n_q, n_k): all of it
    if causal:
        s[np.triu(np.ones((n_q, n_k), dtype=bool), 1)] = -np.inf
    weights = np.exp(s - lse[:, None])  # kept for the loops below
    delta = np.sum(d_out * out, axis=-1, keepdims=True)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for k0 in range(0, n_k, block_size):
        c = slice(k0, min(k0 + block_size, n_k))
        for r0 in range(0, n_q, block_size):
            r = slice(r0, min(r0 + block_size, n_q))
            p = weights[r, c]
            dv[c] += p.T @ d_out[r]
            ds = p * (d_out[r] @ v[c].T - delta[r])
            dq[r] += ds @ k[c] * scale
            dk[c] += ds.T @ q[r] * scale
    return dq, dk, dv
