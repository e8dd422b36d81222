# wrong: the sink columns are allowed for every query, also for the queries that come before a sink
# caught by: test_streaming_mask
# severity: essential
# diagnosis: 排在查询后面的汇聚点也看得见了
# %% streaming_mask
def streaming_mask(n_q, n_k, n_sink, window):
    if n_q > n_k or window < 1 or n_sink < 0:
        raise ValueError("参数不对")
    t = np.arange(n_q)[:, None] + (n_k - n_q)
    j = np.arange(n_k)[None, :]
    return ((j <= t) & (t - j < window)) | (j < n_sink)
