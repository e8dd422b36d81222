# wrong: np.tril on the (n_q, n_k) rectangle aligns top-left: with fewer queries than keys the new ones miss keys
# caught by: test_causal_mask test_masked_attention
# severity: essential
# diagnosis: 对齐到了左上角
# %% causal_mask
def causal_mask(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool))
