# wrong: the future scores masked to −inf and the top k taken by a stable argsort, but the −inf picks are never
# dropped: a query that sees fewer than k keys still selects k, the rest of them future keys
# caught by: test_topk_mask
# severity: essential
# diagnosis: 被掩码的（未来的）键补足了 k 个
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    masked = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)
    order = np.argsort(-masked, axis=1, kind="stable")[:, :k]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen
