# wrong: the causal mask inside a diagonal block is off by one (j >= i hidden): no query sees its own key
# caught by: test_tiled_backward
# severity: essential
# diagnosis: 因果掩码错了一位，把 j = i（对角线）也设成了 −∞
# %% tiled_backward
def tiled_backward(q, k, v, out, lse, d_out, block_size, causal=False):
    q, k, v, out, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, out, d_out))
    lse = np.asarray(lse, dtype=float)
    n_q, n_k = len(q), len(k)
    scale = 1.0 / np.sqrt(q.shape[-1])
    delta = np.sum(d_out * out, axis=-1, keepdims=True)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for k0 in range(0, n_k, block_size):
        c = slice(k0, min(k0 + block_size, n_k))
        for r0 in range(0, n_q, block_size):
            r = slice(r0, min(r0 + block_size, n_q))
            if causal and r.stop - 1 < c.start:
                continue
            s = q[r] @ k[c].T * scale
            if causal:
                s[np.arange(c.start, c.stop)[None, :] >= np.arange(r.start, r.stop)[:, None]] = -np.inf  # off by one
            p = np.exp(s - lse[r, None])
            dv[c] += p.T @ d_out[r]
            ds = p * (d_out[r] @ v[c].T - delta[r])
            dq[r] += ds @ k[c] * scale
            dk[c] += ds.T @ q[r] * scale
    return dq, dk, dv
