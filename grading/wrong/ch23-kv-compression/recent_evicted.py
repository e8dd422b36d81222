# wrong: the recent window is chosen by the heavy-hitter rule too: the top budget keys of all, none kept by force
# caught by: test_h2o_keep
# severity: essential
# diagnosis: 最近的 2 个键也交给累计注意力去挑了
# %% h2o_keep
def h2o_keep(scores, budget, recent):
    if not 0 <= recent <= budget:
        raise ValueError("需要 0 ≤ recent ≤ budget")
    scores = np.asarray(scores)
    n = scores.shape[-1]
    if budget >= n:
        return np.arange(n)
    s = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    totals = (w / w.sum(axis=-1, keepdims=True)).sum(axis=0)
    order = sorted(range(n), key=lambda j: (-totals[j], -j))
    return np.sort(np.array(order[:budget], dtype=np.int64))
