# wrong: heads j, j + h_kv, j + 2 h_kv, ... pooled together (interleaved groups) instead of adjacent heads
# caught by: test_pool_kv_heads
# severity: essential
# diagnosis: 交错分组
# %% pool_kv_heads
def pool_kv_heads(w, n_heads, n_kv_heads):
    w = np.asarray(w)
    d_model, width = w.shape
    if width % n_heads or n_heads % n_kv_heads:
        raise ValueError("不能整除")
    d_head, g = width // n_heads, n_heads // n_kv_heads
    grouped = w.reshape(d_model, g, n_kv_heads, d_head)  # head i lands in group i % n_kv_heads
    return grouped.mean(axis=1).reshape(d_model, n_kv_heads * d_head)
