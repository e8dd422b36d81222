# wrong: never checks that w_q and w_k have the same width, so the mistake only surfaces later (or never)
# caught by: test_qkv_projection
# severity: edge
# diagnosis: 实际没有抛出异常
# %% qkv_projection
def qkv_projection(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float)
    return x @ w_q, x @ w_k, x @ w_v
