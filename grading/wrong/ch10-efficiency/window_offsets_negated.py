# wrong: the window's offsets are negated (j - i runs over 0 .. w - 1 when causal): the same set of keys without
#   causal, but with causal=True each query looks at itself and the w - 1 keys after it, the future
# caught by: test_sliding_window_attention
# severity: essential
# diagnosis: 窗口朝向了未来
# %% sliding_window_attention
def sliding_window_attention(q, k, v, window, global_tokens=(), causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, d_k = q.shape
    glob = np.array(sorted({int(g) for g in global_tokens}), dtype=int)
    q = q / np.sqrt(d_k)
    last = 1 if causal else window
    offsets = -np.arange(-(window - 1), last)
    idx = np.arange(n)[:, None] + offsets
    inside = (idx >= 0) & (idx < n) & ~np.isin(idx, glob)
    idx = np.clip(idx, 0, n - 1)
    local = np.einsum("id,iwd->iw", q, k[idx])
    glob_scores = q @ k[glob].T
    if causal:
        glob_ok = glob[None, :] <= np.arange(n)[:, None]
    else:
        glob_ok = np.ones((n, glob.size), dtype=bool)
    weights = anp.softmax(np.concatenate([local, glob_scores], axis=1),
                          mask=np.concatenate([inside, glob_ok], axis=1))
    width = offsets.size
    out = np.einsum("iw,iwd->id", weights[:, :width], v[idx]) + weights[:, width:] @ v[glob]
    if glob.size:
        ok = np.arange(n)[None, :] <= glob[:, None] if causal else None
        out[glob] = anp.softmax(q[glob] @ k.T, mask=ok) @ v
    return out
