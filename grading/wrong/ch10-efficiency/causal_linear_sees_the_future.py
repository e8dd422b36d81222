# wrong: causal=True still sums over every key (totals, not running sums): later positions leak into earlier ones
# caught by: test_linear_attention
# severity: essential
# diagnosis: 后面的键和值影响了前面的输出
# %% linear_attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    phi_q, phi_k = phi(q), phi(k)
    kv = phi_k.T @ v
    z = phi_k.sum(axis=0)
    return (phi_q @ kv) / (phi_q @ z)[:, None]


def linear_error(q, k, v):
    v = np.asarray(v, dtype=float)
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean(diff**2)) / np.sqrt(np.mean(v**2)))
