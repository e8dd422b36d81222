# right: computed in float32 (right within float32 precision), the double loop with an explicit multiply-add loop
# over d_k, the one loop filling a preallocated buffer, np.matmul with swapaxes, and its own key lengths
# %% scores_double_loop
def scores_double_loop(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    s = np.empty((q.shape[0], k.shape[0]), dtype=np.float32)
    for i in range(q.shape[0]):
        for j in range(k.shape[0]):
            total = np.float32(0.0)
            for d in range(q.shape[1]):
                total += q[i, d] * k[j, d]
            s[i, j] = total
    return s


# %% scores_one_loop
def scores_one_loop(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    s = np.empty((q.shape[0], k.shape[0]), dtype=np.float32)
    for i, q_i in enumerate(q):
        s[i, :] = k @ q_i
    return s


# %% scores_matrix
def scores_matrix(q, k):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q {q.shape} 与 k {k.shape} 的 d_k 不同")
    return np.matmul(q, np.swapaxes(k, -2, -1))


# %% rank_keys
def rank_keys(q, k, by="dot"):
    q, k = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    dot = k @ q
    if by == "dot":
        return np.argsort(-dot)
    if by == "cosine":
        return np.argsort(-dot / np.sqrt(np.sum(k ** 2, axis=-1)))
    raise ValueError(f"by 必须是 'dot' 或 'cosine'，不能是 {by!r}")
