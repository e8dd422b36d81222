# wrong: no causal mask at all: every query may select keys after it
# caught by: test_topk_mask
# severity: essential
# diagnosis: 没有加因果掩码
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    chosen = np.zeros((n, n), dtype=bool)
    np.put_along_axis(chosen, order, True, axis=1)
    return chosen
