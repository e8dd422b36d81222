# wrong: the sink logit is divided by sqrt(d) like the scores
# caught by: test_sink_attention
# severity: essential
# diagnosis: 汇聚点 logit 也除以了 √d
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    scale = np.sqrt(q.shape[-1])
    b = np.asarray(sink_logits, dtype=float)[:, None, None] / scale  # 不该缩放
    s = q @ np.swapaxes(k, -1, -2) / scale
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.maximum(s.max(axis=-1, keepdims=True), b)
    e = np.exp(s - m)
    weights = e / (e.sum(axis=-1, keepdims=True) + np.exp(b - m))
    return weights @ v, weights
