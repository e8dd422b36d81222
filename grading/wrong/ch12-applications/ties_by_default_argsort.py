# wrong: np.argsort(-s) without kind="stable": the default sort may reorder passages whose scores are tied
# caught by: test_retrieve
# severity: edge
# diagnosis: 前 15 名里分数相同的段按下标从小到大
# %% retrieve
def retrieve(query, passages, k, score="dot"):
    q, p = np.asarray(query, dtype=float), np.asarray(passages, dtype=float)
    if q.ndim != 1 or p.ndim != 2 or p.shape[1] != q.shape[0]:
        raise ValueError(f"query 应为 (d,)、passages 应为 (N, d)，收到 {q.shape} 与 {p.shape}")
    if not 1 <= k <= p.shape[0]:
        raise ValueError(f"k 应在 1 到 {p.shape[0]} 之间，收到 {k}")
    s = p @ q
    if score == "scaled":
        s = s / np.sqrt(q.shape[0])
    elif score == "cosine":
        s = s / (np.linalg.norm(p, axis=1) * np.linalg.norm(q))
    elif score != "dot":
        raise ValueError(f"score 应为 'dot'、'scaled' 或 'cosine'，收到 {score!r}")
    return np.argsort(-s)[:k]
