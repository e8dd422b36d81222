# wrong: divides the dot products by sqrt(d), as scaled attention does, and takes that for normalising
# caught by: test_cosine_scores
# severity: essential
# diagnosis: 除以 √d 不是归一化
# %% cosine_scores
def cosine_scores(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
