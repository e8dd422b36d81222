# wrong: query and passages shapes unchecked: a column vector (d, 1) still multiplies and a result comes back
# caught by: test_retrieve
# severity: edge
# diagnosis: 实际没有抛出异常
# %% retrieve
def retrieve(query, passages, k, score="dot"):
    q, p = np.asarray(query, dtype=float), np.asarray(passages, dtype=float)
    if not 1 <= k <= p.shape[0]:
        raise ValueError(f"k 应在 1 到 {p.shape[0]} 之间，收到 {k}")
    s = p @ q
    if score == "scaled":
        s = s / np.sqrt(q.shape[0])
    elif score == "cosine":
        s = s / (np.linalg.norm(p, axis=1) * np.linalg.norm(q))
    elif score != "dot":
        raise ValueError(f"score 应为 'dot'、'scaled' 或 'cosine'，收到 {score!r}")
    return np.argsort(-s, kind="stable")[:k]
