# right: np.einsum throughout, computed in float32 (right within float32 precision), softmax via exp/log-sum-exp
# %% projections
def projections(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=np.float32)
    return tuple(np.einsum("nd,de->ne", x, np.asarray(w, dtype=np.float32)) for w in (w_q, w_k, w_v))


# %% scaled_scores
def scaled_scores(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    return np.einsum("id,jd->ij", q, k) / np.float32(np.sqrt(q.shape[-1]))


# %% attention
def attention(q, k, v):
    s = scaled_scores(q, k)
    top = s.max(axis=-1, keepdims=True)
    log_z = top + np.log(np.exp(s - top).sum(axis=-1, keepdims=True))
    weights = np.exp(s - log_z)
    return np.einsum("ij,jd->id", weights, np.asarray(v, dtype=np.float32)), weights
