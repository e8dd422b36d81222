# wrong: the scores are shifted by their row maximum but the sink's term is exp(b), not exp(b - m)
# caught by: test_sink_attention
# severity: essential
# diagnosis: 汇聚点那一项没有减去同一个最大值
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    b = np.asarray(sink_logits, dtype=float)[:, None, None]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    weights = e / (e.sum(axis=-1, keepdims=True) + np.exp(b))  # 汇聚点没有减 m
    return weights @ v, weights
