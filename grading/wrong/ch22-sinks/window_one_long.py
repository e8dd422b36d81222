# wrong: the window counts one key too many (t - j <= window): each query sees window + 1 recent keys
# caught by: test_streaming_mask
# severity: essential
# diagnosis: 窗口多算了一个
# %% streaming_mask
def streaming_mask(n_q, n_k, n_sink, window):
    if n_q > n_k or window < 1 or n_sink < 0:
        raise ValueError("参数不对")
    t = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return (j <= t) & ((j < n_sink) | (t - j <= window))
