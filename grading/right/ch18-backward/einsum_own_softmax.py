# right: einsum for every product and a softmax of its own (max shift, exp, row sums), the row term as rowsum(P * dP)
# %% attention_backward
def attention_backward(q, k, v, d_out):
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, d_out))
    d = q.shape[-1]
    s = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(d)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    dp = np.einsum("...ie,...je->...ij", d_out, v)
    ds = p * (dp - np.sum(p * dp, axis=-1, keepdims=True))  # the same D, from the weights
    dq = np.einsum("...ij,...jd->...id", ds, k) / np.sqrt(d)
    dk = np.einsum("...ij,...id->...jd", ds, q) / np.sqrt(d)
    dv = np.einsum("...ij,...ie->...je", p, d_out)
    return dq, dk, dv
