# wrong: the offset enters with the wrong sign (j <= i - (n_k - n_q)): right when n_q == n_k, but with fewer queries
#   than keys each query sees fewer keys than its own position, and a single new query sees none
# caught by: test_causal_mask
# severity: essential
# diagnosis: 偏移的符号反了
# %% causal_mask
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] - (n_k - n_q)
