# wrong: the drafts are verified one target step at a time (k + 1 calls), not together in one forward
# caught by: test_verify_step
# severity: essential
# diagnosis: 每个词元调用了一次 step
# %% verify_step
def verify_step(target, cache, last, drafts):
    start = cache.length
    best = [int(np.argmax(target.step([t], cache)[-1])) for t in [last] + list(drafts)]
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    cache.truncate(start + 1 + n)
    return [int(d) for d in drafts[:n]] + [best[n]], start + 1 + n
