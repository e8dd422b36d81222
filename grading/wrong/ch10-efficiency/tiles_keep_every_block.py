# wrong: right values, but every block of scores is kept and joined: the n x n matrix again (O(n^2) memory)
# caught by: test_tiled_attention
# severity: essential
# diagnosis: 约为 4 倍（留下 n×n 的分数时约为 16 倍）：未通过
# %% tiled_attention
def tiled_attention(q, k, v, block_size, causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n_q, n_k = len(q), len(k)
    q = q / np.sqrt(q.shape[-1])
    blocks = []
    for start in range(0, n_k, block_size):
        cols = np.arange(start, min(start + block_size, n_k))
        s = q @ k[cols].T
        if causal:
            s[cols[None, :] > np.arange(n_q)[:, None]] = -np.inf
        blocks.append(s)
    s = np.concatenate(blocks, axis=1)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p @ v / p.sum(axis=1, keepdims=True)
