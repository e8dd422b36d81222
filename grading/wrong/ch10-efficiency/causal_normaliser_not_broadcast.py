# wrong: with causal=True the normaliser has shape (n,) and is not given a second axis, so (n, d_v) / (n,) fails to
#   broadcast (or divides the columns when n == d_v); the running sums themselves are right, nothing leaks
# caught by: test_linear_attention
# severity: essential
# diagnosis: 调用时抛出了异常 ValueError
# %% linear_attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    phi_q, phi_k = phi(q), phi(k)
    if causal:
        kv = np.cumsum(phi_k[:, :, None] * v[:, None, :], axis=0)
        z = np.cumsum(phi_k, axis=0)
        return np.einsum("id,ide->ie", phi_q, kv) / np.einsum("id,id->i", phi_q, z)
    return (phi_q @ (phi_k.T @ v)) / (phi_q @ phi_k.sum(axis=0))[:, None]


def linear_error(q, k, v):
    v = np.asarray(v, dtype=float)
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean(diff**2)) / np.sqrt(np.mean(v**2)))
