# wrong: every row is shifted by the largest score of the whole array (and b), not by its own row's maximum: rows far
# below that maximum underflow to 0 / 0 = NaN when the scores are in the thousands
# caught by: test_sink_attention
# severity: essential
# diagnosis: NaN
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    b = np.asarray(sink_logits, dtype=float)[:, None, None]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.maximum(s.max(), b)  # 整个数组的最大分数，不是每一行的
    e = np.exp(s - m)
    weights = e / (e.sum(axis=-1, keepdims=True) + np.exp(b - m))
    return weights @ v, weights
