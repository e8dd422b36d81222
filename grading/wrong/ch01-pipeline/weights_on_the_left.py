# wrong: applies each projection as W @ x (one column per token), so it returns the transposes of Q, K and V
# caught by: test_projections
# severity: essential
# diagnosis: 正确结果的转置
# %% projections
def projections(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float)
    return w_q.T @ x.T, w_k.T @ x.T, w_v.T @ x.T
