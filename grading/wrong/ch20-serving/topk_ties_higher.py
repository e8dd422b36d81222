# wrong: ties go to the higher key index (argsort of the scores, taken from the end)
# caught by: test_topk_mask
# severity: essential
# diagnosis: 取了下标大的键
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    visible = np.tril(np.ones((n, n), dtype=bool))
    order = np.argsort(np.where(visible, scores, -np.inf), axis=1, kind="stable")[:, ::-1][:, :k]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen & visible
