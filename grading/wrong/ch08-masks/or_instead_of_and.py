# wrong: the two masks combined with | (or): a key is let through when it is in the past OR not padding
# caught by: test_decoder_mask
# severity: essential
# diagnosis: 应当用 &（与）
# %% decoder_mask
def decoder_mask(lengths, n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return padding_mask(lengths, n_k) | causal_mask(n_q, n_k)
