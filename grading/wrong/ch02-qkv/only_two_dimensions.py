# wrong: an einsum written for one sentence (n, d_model): every visible case passes, a batch (2, n, d_model) fails
# caught by: test_qkv_projection
# severity: essential
# diagnosis: 调用时抛出了异常 ValueError
# %% qkv_projection
def qkv_projection(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float)
    if w_q.shape[-1] != w_k.shape[-1]:
        raise ValueError(f"w_q {w_q.shape} 和 w_k {w_k.shape} 的列数必须相同")
    return tuple(np.einsum("nd,de->ne", x, w) for w in (w_q, w_k, w_v))
