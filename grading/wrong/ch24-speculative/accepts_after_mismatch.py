# wrong: every draft equal to its row's argmax is accepted, also after the first mismatch (whose context is gone)
# caught by: test_verify_step
# severity: essential
# diagnosis: 遇到第一个不一致的草稿以后没有停
# %% verify_step
def verify_step(target, cache, last, drafts):
    start = cache.length
    best = np.argmax(target.step([last] + list(drafts), cache), axis=-1)
    kept = [int(d) for d, b in zip(drafts, best, strict=False) if d == b]  # 应在第一个不相等处停下
    n = len(kept)
    cache.truncate(start + 1 + n)
    return kept + [int(best[n])], start + 1 + n
