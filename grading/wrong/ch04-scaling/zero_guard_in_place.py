# wrong: guards 0 ln 0 by writing 1 over the zeros of the caller's array (np.asarray makes no copy): the input changes
# caught by: test_row_entropy
# severity: edge
# diagnosis: 改动了传入的数组
# %% row_entropy
def row_entropy(weights):
    w = np.asarray(weights, dtype=float)
    w[w == 0] = 1.0  # 1 ln 1 = 0, just like 0 ln 0
    return -np.sum(w * np.log(w), axis=-1)
