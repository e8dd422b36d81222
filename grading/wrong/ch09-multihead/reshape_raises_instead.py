# wrong: no divisibility check: reshape still raises ValueError, but its message does not name d_model and n_heads
# caught by: test_split_merge
# severity: edge
# diagnosis: cannot reshape array of size 40
# %% split_merge
def split_heads(x, n_heads):
    x = np.asarray(x)
    *lead, n, d_model = x.shape
    return np.swapaxes(x.reshape(*lead, n, n_heads, d_model // n_heads), -2, -3)


def merge_heads(x):
    x = np.asarray(x)
    *lead, h, n, d_head = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, n, h * d_head)
