# wrong: the polarity of nn.MultiheadAttention (True = may NOT attend): True above the diagonal, where the future is
# caught by: test_causal_mask test_masked_attention
# severity: essential
# diagnosis: True 和 False 正好反了
# %% causal_mask
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.arange(n_k)[None, :] > np.arange(n_q)[:, None] + (n_k - n_q)
