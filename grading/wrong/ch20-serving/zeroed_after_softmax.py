# wrong: softmax over every visible key first, then the unselected weights set to 0 (the rest no longer sums to 1)
# caught by: test_topk_attention
# severity: essential
# diagnosis: 再把没选中的权重置零
# %% topk_attention
def topk_attention(q, k, v, scores, top_k):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    visible = np.tril(np.ones((len(q), len(q)), dtype=bool))
    s = np.where(visible, q @ k.T / np.sqrt(q.shape[-1]), -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w = w / w.sum(axis=1, keepdims=True)
    return (w * topk_mask(scores, top_k)) @ v
