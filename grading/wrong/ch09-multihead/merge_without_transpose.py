# wrong: split_heads is right, but merge_heads reshapes (h, n, d_head) straight to (n, h * d_head), in the wrong order
# caught by: test_split_merge test_multi_head_attention
# severity: essential
# diagnosis: 合并前要先把头和词元两维换回来
# %% split_merge
def split_heads(x, n_heads):
    x = np.asarray(x)
    *lead, n, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
    return np.swapaxes(x.reshape(*lead, n, n_heads, d_model // n_heads), -2, -3)


def merge_heads(x):
    x = np.asarray(x)
    *lead, h, n, d_head = x.shape
    return x.reshape(*lead, n, h * d_head)
