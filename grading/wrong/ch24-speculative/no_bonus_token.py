# wrong: only the accepted drafts are returned, not the target's own token after them
# caught by: test_verify_step
# severity: essential
# diagnosis: 少了目标模型自己给出的那个词元
# %% verify_step
def verify_step(target, cache, last, drafts):
    start = cache.length
    best = np.argmax(target.step([last] + list(drafts), cache), axis=-1)
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    cache.truncate(start + 1 + n)
    return [int(d) for d in drafts[:n]], start + 1 + n
