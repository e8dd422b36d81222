# wrong: split and merge as single reshapes, no transpose: the shapes are right, but a "head" mixes pieces of tokens
# caught by: test_split_merge test_multi_head_attention
# severity: essential
# diagnosis: 不同词元的数混进了同一个头
# %% split_merge
def split_heads(x, n_heads):
    x = np.asarray(x)
    *lead, n, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
    return x.reshape(*lead, n_heads, n, d_model // n_heads)


def merge_heads(x):
    x = np.asarray(x)
    *lead, h, n, d_head = x.shape
    return x.reshape(*lead, n, h * d_head)
