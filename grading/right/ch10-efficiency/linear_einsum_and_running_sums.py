# right: einsum for the sums, a loop with running sums for causal, math.sqrt for the error
# %% linear_attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    fq, fk = phi(np.asarray(q, dtype=float)), phi(np.asarray(k, dtype=float))
    v = np.asarray(v, dtype=float)
    if not causal:
        kv = np.einsum("jd,je->de", fk, v)
        z = np.einsum("jd->d", fk)
        return np.einsum("id,de->ie", fq, kv) / np.einsum("id,d->i", fq, z)[:, None]
    kv = np.zeros((fk.shape[1], v.shape[1]))
    z = np.zeros(fk.shape[1])
    out = np.empty((len(fq), v.shape[1]))
    for i in range(len(fq)):
        kv += np.outer(fk[i], v[i])
        z += fk[i]
        out[i] = fq[i] @ kv / (fq[i] @ z)
    return out


def linear_error(q, k, v):
    v = np.asarray(v, dtype=float)
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return math.sqrt(float(np.mean(diff * diff)) / float(np.mean(v * v)))
