# right: query blocks outside and key blocks inside (FlashAttention-1's order), the causal mask from index grids
# %% tiled_backward
def tiled_backward(q, k, v, out, lse, d_out, block_size, causal=False):
    q, k, v, out, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, out, d_out))
    lse = np.asarray(lse, dtype=float)
    scale = 1.0 / np.sqrt(q.shape[-1])
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for r0 in range(0, len(q), block_size):
        rows = np.arange(r0, min(r0 + block_size, len(q)))
        delta = np.sum(d_out[rows] * out[rows], axis=1, keepdims=True)  # this block's rows of D
        last = rows[-1] + 1 if causal else len(k)  # keys right of the block's last query are never seen
        for k0 in range(0, last, block_size):
            cols = np.arange(k0, min(k0 + block_size, last))
            s = q[rows] @ k[cols].T * scale
            if causal:
                s = np.where(cols[None, :] <= rows[:, None], s, -np.inf)
            p = np.exp(s - lse[rows][:, None])
            ds = p * (d_out[rows] @ v[cols].T - delta)
            dq[rows] += ds @ k[cols] * scale
            dk[cols] += ds.T @ q[rows] * scale
            dv[cols] += p.T @ d_out[rows]
    return dq, dk, dv
