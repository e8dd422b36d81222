# wrong: causal_mask(n_k, n_q), the two sizes swapped: the same mask when n_q == n_k, a (n_k, n_q) mask that does
#   not broadcast against the padding mask otherwise
# caught by: test_decoder_mask
# severity: essential
# diagnosis: 调用时抛出了异常 ValueError
# %% decoder_mask
def decoder_mask(lengths, n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return padding_mask(lengths, n_k) & causal_mask(n_k, n_q)
