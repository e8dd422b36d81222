# right: the acceptance with np.cumprod over the accept flags; the tree's ancestors found by walking up with a
# while loop; the verification's accepted prefix from np.cumprod of the matches
# %% accept_step
def accept_step(p, q, draft, u):
    p, q = np.asarray(p, dtype=np.float32), np.asarray(q, dtype=np.float32)
    rows = np.arange(len(draft))
    ok = np.asarray(u) < p[rows, draft] / q[rows, draft]
    n = int(np.cumprod(ok).sum())
    if n == len(draft):
        return n, p[n]
    rest = np.clip(p[n] - q[n], 0, None)
    return n, rest / np.sum(rest)


# %% tree_mask_and_positions
def tree_mask_and_positions(parents, start):
    n = len(parents)
    mask = np.zeros((n, n), dtype=bool)
    positions = np.full(n, start)
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = True
            positions[i] += j != i
            j = parents[j]
    return mask, positions


# %% verify_step
def verify_step(target, cache, last, drafts):
    length = cache.length
    logits = target.step([last, *drafts], cache)
    best = logits.argmax(axis=1)
    n = int(np.cumprod(np.array(drafts, dtype=int) == best[:len(drafts)]).sum())
    length += n + 1
    cache.truncate(length)
    return list(map(int, best[:n + 1])), length
