# wrong: copy-paste slip, the values are projected with w_k (right shape only when d_v == d_k, wrong numbers always)
# caught by: test_qkv_projection
# severity: essential
# diagnosis: v 等于 x @ w_k
# %% qkv_projection
def qkv_projection(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float)
    if w_q.shape[-1] != w_k.shape[-1]:
        raise ValueError(f"w_q {w_q.shape} 和 w_k {w_k.shape} 的列数必须相同")
    return x @ w_q, x @ w_k, x @ w_k
