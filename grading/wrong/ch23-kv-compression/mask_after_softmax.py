# wrong: the softmax is taken over the whole row and only then are the future keys' weights set to zero, without
# normalizing the rows again
# caught by: test_h2o_keep
# severity: essential
# diagnosis: softmax 没有先掩码，之后才把未来的键的权重置零
# %% h2o_keep
def h2o_keep(scores, budget, recent):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    if recent < 0 or recent > budget:
        raise ValueError("recent 必须在 0 到 budget 之间")
    if budget >= n:
        return np.arange(n)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    w = e / e.sum(axis=1, keepdims=True)
    w = np.tril(w)  # the future keys dropped after the softmax, rows not normalized again
    acc = w.sum(axis=0)
    rev = np.arange(n - recent)[::-1]
    order = rev[np.argsort(-acc[rev], kind="stable")]
    return np.sort(np.concatenate([order[:budget - recent], np.arange(n - recent, n)]))
