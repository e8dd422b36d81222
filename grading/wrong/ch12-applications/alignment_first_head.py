# wrong: reads the alignment off the first head only, as if one head were the model's alignment
# caught by: test_read_alignment
# severity: essential
# diagnosis: 只看了第一个头
# %% read_alignment
def read_alignment(weights):
    w = np.asarray(weights, dtype=float)
    if w.ndim < 3:
        raise ValueError("weights 至少三维")
    return w[..., 0, :, :].argmax(axis=-1)
