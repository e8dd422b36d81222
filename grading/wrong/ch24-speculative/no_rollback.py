# wrong: the cache is not rolled back after a rejection: the rejected drafts stay in it
# caught by: test_verify_step
# severity: essential
# diagnosis: 缓存没有回滚
# %% verify_step
def verify_step(target, cache, last, drafts):
    start = cache.length
    best = np.argmax(target.step([last] + list(drafts), cache), axis=-1)
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    return [int(d) for d in drafts[:n]] + [int(best[n])], start + 1 + n
