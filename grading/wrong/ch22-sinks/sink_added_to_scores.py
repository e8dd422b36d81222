# wrong: the sink logit is added to every score instead of the denominator, so softmax (shift-invariant) ignores it
# caught by: test_sink_attention
# severity: essential
# diagnosis: 汇聚点 logit 没有起作用
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s + np.asarray(sink_logits)[:, None, None]  # 加到了每个分数上
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return weights @ v, weights
