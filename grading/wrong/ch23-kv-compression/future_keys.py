# wrong: the softmax is taken over the whole row, so the accumulated attention includes masked (future) keys
# caught by: test_h2o_keep
# severity: essential
# diagnosis: 累计注意力里算进了被掩码的（未来的）键
# %% h2o_keep
def h2o_keep(scores, budget, recent):
    if not 0 <= recent <= budget:
        raise ValueError("需要 0 ≤ recent ≤ budget")
    scores = np.asarray(scores)
    n = scores.shape[-1]
    if budget >= n:
        return np.arange(n)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    totals = (w / w.sum(axis=-1, keepdims=True)).sum(axis=0)
    older = n - recent
    order = sorted(range(older), key=lambda j: (-totals[j], -j))
    return np.sort(np.array(order[:budget - recent] + list(range(older, n)), dtype=np.int64))
