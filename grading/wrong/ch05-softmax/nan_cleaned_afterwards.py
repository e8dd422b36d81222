# wrong: lets a fully masked row compute -inf - (-inf) = nan and turns the nan into 0 afterwards (np.nan_to_num):
# the output is right, but the computation produces the nan the instructions rule out
# caught by: test_masked_softmax
# severity: edge
# diagnosis: FloatingPointError
# %% masked_softmax
def masked_softmax(x, mask, axis=-1):
    scores = np.where(mask, np.asarray(x, dtype=float), -np.inf)
    e = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    return np.nan_to_num(e / np.sum(e, axis=axis, keepdims=True))
