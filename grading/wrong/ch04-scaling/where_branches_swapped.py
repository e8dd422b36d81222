# wrong: the 0 ln 0 guard with the two branches of np.where swapped (np.where(w > 0, 1.0, w)): every positive weight
# becomes 1 (ln 1 = 0) and every zero stays 0 (ln 0 = -inf), so a row without zeros gets 0 and a row with one nan
# caught by: test_row_entropy
# severity: essential
# diagnosis: 期望 1.386，实际 -0
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    safe = np.where(w > 0, 1.0, w)
    return -np.sum(w * np.log(safe), axis=-1)
