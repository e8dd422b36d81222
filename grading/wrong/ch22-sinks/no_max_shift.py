# wrong: exp of the raw scores and of the sink logit, no shift: scores in the thousands overflow to inf/inf = NaN
# caught by: test_sink_attention
# severity: essential
# diagnosis: NaN
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    b = np.asarray(sink_logits, dtype=float)[:, None, None]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s)
    if mask is not None:
        e = np.where(mask, e, 0.0)
    weights = e / (e.sum(axis=-1, keepdims=True) + np.exp(b))
    return weights @ v, weights
