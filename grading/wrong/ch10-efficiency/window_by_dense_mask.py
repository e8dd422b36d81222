# wrong: right values, but it builds the n x n mask and scores (O(n^2) memory), which the window avoids
# caught by: test_sliding_window_attention
# severity: essential
# diagnosis: 约为 4 倍（构造 n×n 的数组时约为 16 倍）：未通过
# %% sliding_window_attention
def sliding_window_attention(q, k, v, window, global_tokens=(), causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n = len(q)
    offset = np.arange(n)[:, None] - np.arange(n)[None, :]
    allowed = (offset >= 0) & (offset < window) if causal else np.abs(offset) < window
    is_global = np.zeros(n, dtype=bool)
    is_global[list(global_tokens)] = True
    allowed |= is_global[:, None] | is_global[None, :]
    if causal:
        allowed &= offset >= 0
    scores = q @ k.T / np.sqrt(q.shape[-1])
    return anp.softmax(scores, mask=allowed) @ v
