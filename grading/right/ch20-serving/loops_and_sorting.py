# right: plain Python: divmod for the block table, a loop over the requests, and each query's visible keys sorted
# by (-score, index); the sparse attention one query at a time over its own keys
# %% block_slot
def block_slot(table, t, block_size):
    if t < 0 or t >= len(table) * block_size:
        raise ValueError("position outside the block table")
    index, slot = divmod(t, block_size)
    return table[index], slot
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    full = prefix_len // block_size
    total = full
    for n in lengths:
        if n <= prefix_len:
            raise ValueError("a request no longer than the prefix")
        own = n - full * block_size
        total += (own + block_size - 1) // block_size
    return total
# %% topk_mask
def topk_mask(scores, k):
    scores = np.asarray(scores, dtype=float)
    n = scores.shape[0]
    chosen = np.zeros((n, n), dtype=bool)
    for i in range(n):
        keep = sorted(range(i + 1), key=lambda j: (-scores[i, j], j))[:k]
        chosen[i, keep] = True
    return chosen
# %% topk_attention
def topk_attention(q, k, v, scores, top_k):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    chosen = topk_mask(scores, top_k)
    out = np.zeros((len(q), v.shape[1]))
    for i in range(len(q)):
        keys = np.flatnonzero(chosen[i])
        s = k[keys] @ q[i] / np.sqrt(q.shape[1])
        w = np.exp(s - s.max())
        out[i] = (w / w.sum()) @ v[keys]
    return out
