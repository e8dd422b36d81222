# right: the recurrence as the matrix product alpha_t (I - beta_t k_t k_t^T) S + beta_t k_t v_t^T in float32; the
# layer with np.linalg.norm and a tanh sigmoid; the chunks with an explicit inverse of I + A and the state as an
# einsum
# %% delta_recurrence
def delta_recurrence(q, k, v, beta, alpha=None, state=None):
    q, k, v, beta = (np.asarray(a, dtype=np.float32) for a in (q, k, v, beta))
    n, d_k = k.shape
    alpha = np.ones(n, np.float32) if alpha is None else np.asarray(alpha, dtype=np.float32)
    s = np.zeros((d_k, v.shape[1]), np.float32) if state is None else np.asarray(state, dtype=np.float32).copy()
    eye = np.eye(d_k, dtype=np.float32)
    rows = []
    for q_t, k_t, v_t, b_t, a_t in zip(q, k, v, beta, alpha, strict=True):
        s = a_t * (eye - b_t * np.outer(k_t, k_t)) @ s + b_t * np.outer(k_t, v_t)
        rows.append(s.T @ q_t)
    return np.array(rows).reshape(n, v.shape[1]), s
# %% gated_delta_layer
def gated_delta_layer(x, weights):
    x = np.asarray(x, dtype=float)
    q, k = x @ weights["w_q"], x @ weights["w_k"]
    q = q / np.linalg.norm(q, axis=1)[:, None]
    k = k / np.linalg.norm(k, axis=1)[:, None]
    beta = 0.5 * (1 + np.tanh(0.5 * (x @ weights["w_beta"])))
    alpha = 0.5 * (1 + np.tanh(0.5 * (x @ weights["w_alpha"])))
    out, _ = delta_recurrence(q, k, x @ weights["w_v"], beta, alpha)
    return out @ weights["w_o"]
# %% chunked_delta
def chunked_delta(q, k, v, beta, chunk_size, state=None):
    q, k, v, beta = (np.asarray(a, dtype=float) for a in (q, k, v, beta))
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else np.asarray(state, dtype=float)
    out = np.zeros((len(q), v.shape[1]))
    for start in range(0, len(q), chunk_size):
        stop = min(start + chunk_size, len(q))
        qc, kc, vc, bc = q[start:stop], k[start:stop], v[start:stop], beta[start:stop]
        c = stop - start
        below = np.tri(c, k=-1, dtype=bool)
        a = np.where(below, np.einsum("i,id,jd->ij", bc, kc, kc), 0.0)
        d = np.linalg.inv(np.eye(c) + a) @ (bc[:, None] * (vc - np.einsum("id,de->ie", kc, s)))
        scores = np.where(np.tri(c, dtype=bool), np.einsum("id,jd->ij", qc, kc), 0.0)
        out[start:stop] = np.einsum("id,de->ie", qc, s) + scores @ d
        s = s + np.einsum("id,ie->de", kc, d)
    return out, s
