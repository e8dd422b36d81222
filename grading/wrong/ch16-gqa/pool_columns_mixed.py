# wrong: the columns are read as (d_head, n_heads), so columns of different heads and positions are averaged
# caught by: test_pool_kv_heads
# severity: essential
# diagnosis: 平均的不是对应的列
# %% pool_kv_heads
def pool_kv_heads(w, n_heads, n_kv_heads):
    w = np.asarray(w)
    d_model, width = w.shape
    if width % n_heads or n_heads % n_kv_heads:
        raise ValueError("不能整除")
    d_head, g = width // n_heads, n_heads // n_kv_heads
    return w.reshape(d_model, d_head, n_kv_heads, g).mean(axis=3).reshape(d_model, n_kv_heads * d_head)
