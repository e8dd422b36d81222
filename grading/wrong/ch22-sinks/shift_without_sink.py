# wrong: each row is shifted by the maximum of its visible scores only; a fully masked row has max -inf and gives NaN
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
    m = s.max(axis=-1, keepdims=True)  # 没有把 b 算进最大值
    e = np.exp(s - m)
    weights = e / (e.sum(axis=-1, keepdims=True) + np.exp(b - m))
    return weights @ v, weights
