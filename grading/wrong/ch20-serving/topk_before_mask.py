# wrong: the top k taken over all keys, the causal mask applied afterwards: future keys take places
# caught by: test_topk_mask
# severity: essential
# diagnosis: 再加因果掩码
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen & np.tril(np.ones((n, n), dtype=bool))
