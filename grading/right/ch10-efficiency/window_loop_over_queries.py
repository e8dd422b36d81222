# right: a loop over the queries, a sorted list of keys per query, its own softmax
# %% sliding_window_attention
def sliding_window_attention(q, k, v, window, global_tokens=(), causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, d_k = q.shape
    glob = sorted({int(g) for g in global_tokens})
    out = np.empty((n, v.shape[1]))
    for i in range(n):
        if i in glob:
            keys = list(range(i + 1)) if causal else list(range(n))
        else:
            hi = i + 1 if causal else min(n, i + window)
            keys = set(range(max(0, i - window + 1), hi))
            keys |= {g for g in glob if not causal or g <= i}
            keys = sorted(keys)
        s = k[keys] @ q[i] / math.sqrt(d_k)
        e = np.exp(s - s.max())
        out[i] = e @ v[keys] / e.sum()
    return out
