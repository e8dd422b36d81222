# wrong: the softmax over the selected keys, but the scores not divided by sqrt(d_k)
# caught by: test_topk_attention
# severity: edge
# diagnosis: 分数没有除以 √d_k
# %% topk_attention
def topk_attention(q, k, v, scores, top_k):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    s = np.where(topk_mask(scores, top_k), q @ k.T, -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v
