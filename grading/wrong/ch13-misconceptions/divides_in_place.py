# wrong: right cosines, but the vectors are divided in place (q /= ...), so the caller's arrays come back changed
# caught by: test_cosine_scores
# severity: edge
# diagnosis: 输入数组被改动了
# %% cosine_scores
def cosine_scores(q, k):
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q @ np.swapaxes(k, -1, -2)
