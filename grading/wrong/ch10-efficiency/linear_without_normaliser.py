# wrong: phi(Q) (phi(K)^T V) without dividing by phi(q_i) . sum_j phi(k_j): the weights do not sum to 1
# caught by: test_linear_attention
# severity: essential
# diagnosis: 权重之和不是 1
# %% linear_attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    phi_q, phi_k = phi(q), phi(k)
    if causal:
        kv = np.cumsum(phi_k[:, :, None] * v[:, None, :], axis=0)
        return np.einsum("id,ide->ie", phi_q, kv)
    return phi_q @ (phi_k.T @ v)


def linear_error(q, k, v):
    v = np.asarray(v, dtype=float)
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean(diff**2)) / np.sqrt(np.mean(v**2)))
