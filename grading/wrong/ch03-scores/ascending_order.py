# wrong: np.argsort(scores) without negating: the keys come out from the lowest score to the highest
# caught by: test_rank_keys
# severity: essential
# diagnosis: 顺序反了
# %% rank_keys
def rank_keys(q, k, by="dot"):
    q = np.asarray(q, dtype=float)
    k = np.asarray(k, dtype=float)
    if by == "dot":
        scores = k @ q
    elif by == "cosine":
        scores = (k @ q) / (np.linalg.norm(k, axis=-1) * np.linalg.norm(q))
    else:
        raise ValueError(f"by 只能是 'dot' 或 'cosine'，收到 {by!r}")
    return np.argsort(scores)
