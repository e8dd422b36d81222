# wrong: query i is taken at position i, not i + n_k - n_q, so with fewer queries than keys the recent keys are lost
# caught by: test_streaming_mask
# severity: essential
# diagnosis: 没有右下对齐
# %% streaming_mask
def streaming_mask(n_q, n_k, n_sink, window):
    if n_q > n_k or window < 1 or n_sink < 0:
        raise ValueError("参数不对")
    t = np.arange(n_q)[:, None]
    j = np.arange(n_k)[None, :]
    return (j <= t) & ((j < n_sink) | (t - j < window))
