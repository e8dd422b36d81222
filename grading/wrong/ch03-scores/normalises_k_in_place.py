# wrong: divides k by its row lengths in place (k /= ...), so the caller's keys come back normalised
# caught by: test_rank_keys
# severity: edge
# diagnosis: 传入的 k 变成了每个键除以自身长度的结果
# %% rank_keys
def rank_keys(q, k, by="dot"):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if by == "dot":
        return np.argsort(-(k @ q))
    if by == "cosine":
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
        return np.argsort(-(k @ q))
    raise ValueError(f"by 只能是 'dot' 或 'cosine'，收到 {by!r}")
