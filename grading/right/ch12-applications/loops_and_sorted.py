# right: retrieval with Python loops and sorted() on (-score, index) pairs, lengths from sums of squares; the alignment
# by summing the heads with einsum (the same argmax as the mean) and a loop over the rows
# %% retrieve
def retrieve(query, passages, k, score="dot"):
    q = np.array(query, dtype=float)
    p = np.array(passages, dtype=float)
    if q.ndim != 1 or p.ndim != 2 or p.shape[1] != len(q):
        raise ValueError("query 应为 (d,)，passages 应为 (N, d)")
    if score not in ("dot", "scaled", "cosine"):
        raise ValueError(f"未知的 score：{score!r}")
    if not 1 <= k <= len(p):
        raise ValueError("k 应在 1 到 N 之间")
    q_len = sum(x * x for x in q) ** 0.5
    scores = []
    for i, row in enumerate(p):
        s = sum(a * b for a, b in zip(row, q, strict=True))
        if score == "scaled":
            s /= len(q) ** 0.5
        elif score == "cosine":
            s /= sum(a * a for a in row) ** 0.5 * q_len
        scores.append((-s, i))
    return np.array([i for _, i in sorted(scores)[:k]], dtype=int)
# %% read_alignment
def read_alignment(weights):
    w = np.asarray(weights, dtype=float)
    if w.ndim < 3:
        raise ValueError("weights 至少要有三维 (..., h, n_t, n_s)")
    total = np.einsum("...htn->...tn", w)  # 各头之和：与平均只差一个正的倍数
    rows = total.reshape(-1, total.shape[-1])
    best = np.empty(len(rows), dtype=int)
    for r, row in enumerate(rows):
        best[r] = int(np.argmax(row))
    return best.reshape(total.shape[:-1])
