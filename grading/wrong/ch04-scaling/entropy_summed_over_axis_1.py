# wrong: sums the terms over axis=1, which is the last axis only for 2-D weights: a batch of rows keeps the wrong axis
# caught by: test_row_entropy
# severity: essential
# diagnosis: 形状不对：期望 (2, 3)，实际 (2, 6)
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=1)
