# wrong: divides the queries by their length but not the keys, so long keys still win
# caught by: test_cosine_scores
# severity: essential
# diagnosis: 键没有除以长度
# %% cosine_scores
def cosine_scores(q, k):
    q = np.asarray(q, dtype=float)
    q_unit = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return q_unit @ np.swapaxes(np.asarray(k, dtype=float), -1, -2)
