# wrong: np.argsort sorts from low to high, so the last k indices are taken: the right k passages, but the best one
# comes last
# caught by: test_retrieve
# severity: essential
# diagnosis: 但顺序反了
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
    return np.argsort(s, kind="stable")[-k:]
