# wrong: sums the terms down the columns (axis=0) instead of along each row: one number per key, not per row
# caught by: test_row_entropy
# severity: essential
# diagnosis: 沿最后一维（每一行）求和
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, w, 1.0)
    return -np.sum(w * np.log(safe), axis=0)
