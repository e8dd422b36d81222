# wrong: masked first, then np.argpartition picks k of the highest scores: among tied scores it keeps whichever the
# partition leaves in front, not the lower indices
# caught by: test_topk_mask
# severity: essential
# diagnosis: 相差最大的在下标 (6, 0) 处：期望 1，实际 0
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    visible = np.tril(np.ones((n, n), dtype=bool))
    masked = np.where(visible, scores, -np.inf)
    kk = min(k, n)
    order = np.argpartition(-masked, kk - 1, axis=1)[:, :kk]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen & visible
