# wrong: between equal accumulated attention the older key is kept (a stable sort of the totals)
# caught by: test_h2o_keep
# severity: edge
# diagnosis: 累计注意力并列时留下了较早的键
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
    older = n - recent
    heavy = np.argsort(-totals[:older], kind="stable")[:budget - recent]
    return np.sort(np.concatenate([heavy, np.arange(older, n)]))
