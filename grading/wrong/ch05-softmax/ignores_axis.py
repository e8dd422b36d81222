# wrong: always normalises along the last axis, whatever `axis` says
# caught by: test_softmax_stable
# severity: essential
# diagnosis: 不要写死 axis=-1
# %% softmax_stable
def softmax_stable(x, axis=-1):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)
