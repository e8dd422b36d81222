# wrong: the selection is made but the softmax still runs over every visible key (unselected keys left in)
# caught by: test_topk_attention
# severity: essential
# diagnosis: softmax 在全部可见的键上做了
# %% topk_attention
def topk_attention(q, k, v, scores, top_k):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    visible = np.tril(np.ones((len(q), len(q)), dtype=bool))
    s = np.where(visible, q @ k.T / np.sqrt(q.shape[-1]), -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v
