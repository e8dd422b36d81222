# wrong: the padding mask laid over the query axis, shape (B, n_k, 1): real queries still attend to the padding keys
# caught by: test_padding_mask test_cross_attention
# severity: essential
# diagnosis: 掩码落在了查询这一维上
# %% padding_mask
def padding_mask(lengths, n_k):
    lengths = np.asarray(lengths)
    return (np.arange(n_k)[None, :] < lengths[:, None])[:, :, None]
