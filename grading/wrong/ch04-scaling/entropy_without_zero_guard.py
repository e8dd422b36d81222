# wrong: -sum(w * log w) straight from the formula: a zero weight gives 0 * log 0 = nan instead of 0
# caught by: test_row_entropy
# severity: essential
# diagnosis: 个 NaN（期望里没有）
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    return -np.sum(w * np.log(w), axis=-1)
