# wrong: the slice stops one short ([:k - 1], as if k were the last index to keep), so one passage too few comes back;
# the old fallback hint told it that cosine divides by both lengths
# caught by: test_retrieve
# severity: essential
# diagnosis: 只返回了前 k − 1
# %% retrieve
def retrieve(query, passages, k, score="dot"):
    q, p = np.asarray(query, dtype=float), np.asarray(passages, dtype=float)
    if q.ndim != 1 or p.ndim != 2 or p.shape[1] != q.shape[0]:
        raise ValueError("形状不对")
    if not 1 <= k <= p.shape[0]:
        raise ValueError("k 超出范围")
    s = p @ q
    if score == "scaled":
        s = s / np.sqrt(q.shape[0])
    elif score == "cosine":
        s = s / (np.linalg.norm(p, axis=1) * np.linalg.norm(q))
    elif score != "dot":
        raise ValueError("未知的 score")
    return np.argsort(-s, kind="stable")[:k - 1]
