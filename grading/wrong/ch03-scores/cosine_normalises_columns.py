# wrong: divides k by the norms of its columns (axis=0) instead of the length of each key (axis=-1)
# caught by: test_rank_keys
# severity: essential
# diagnosis: 按列归一化
# %% rank_keys
def rank_keys(q, k, by="dot"):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if by == "dot":
        return np.argsort(-(k @ q))
    if by == "cosine":
        k_unit = k / np.linalg.norm(k, axis=0, keepdims=True)
        return np.argsort(-(k_unit @ q))
    raise ValueError(f"by 只能是 'dot' 或 'cosine'，收到 {by!r}")
