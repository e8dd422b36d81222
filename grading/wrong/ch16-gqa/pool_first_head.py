# wrong: each group keeps its first head's projection instead of the mean of the group
# caught by: test_pool_kv_heads
# severity: essential
# diagnosis: 每组只留下了第一个头
# %% pool_kv_heads
def pool_kv_heads(w, n_heads, n_kv_heads):
    w = np.asarray(w)
    d_model, width = w.shape
    if width % n_heads or n_heads % n_kv_heads:
        raise ValueError("不能整除")
    d_head, g = width // n_heads, n_heads // n_kv_heads
    return w.reshape(d_model, n_kv_heads, g, d_head)[:, :, 0, :].reshape(d_model, n_kv_heads * d_head)
