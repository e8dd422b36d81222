# right: the sink as one more column of logits (as gpt-oss's reference code does), a softmax of their own over the
# row, the column dropped; the mask by two loops; the cache keeps (index, key, value) triples and filters them
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.array(x, dtype=float) for x in (q, k, v))
    h, n_q, d = q.shape
    s = np.einsum("hqd,hkd->hqk", q, k) / np.sqrt(d)
    if mask is not None:
        s[:, ~np.asarray(mask, dtype=bool)] = -np.inf
    column = np.broadcast_to(np.asarray(sink_logits, dtype=float)[:, None, None], (h, n_q, 1))
    logits = np.concatenate([s, column], axis=-1)  # 汇聚点是多出的一列
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights = (e / e.sum(axis=-1, keepdims=True))[..., :-1]  # 去掉汇聚点那一列
    return np.einsum("hqk,hkd->hqd", weights, v), weights
# %% streaming_mask
def streaming_mask(n_q, n_k, n_sink, window):
    if n_q > n_k or window < 1 or n_sink < 0:
        raise ValueError("n_q 不能大于 n_k，window 至少为 1，n_sink 不能为负")
    mask = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        t = i + n_k - n_q
        for j in range(t + 1):
            mask[i, j] = j < n_sink or t - j < window
    return mask
# %% sink_cache
class SinkCache:
    """带汇聚点的滚动 KV 缓存（一层）。

    参数
    ----
    n_sink : int
        汇聚点的个数。
    window : int
        窗口大小，含新词元。
    """

    def __init__(self, n_sink, window):
        if n_sink < 0 or window < 1:
            raise ValueError("参数不对")
        self.n_sink, self.window = n_sink, window
        self.keys, self.values, self.held = [], [], []
        self.seen = 0
        self.items = []  # (原文下标, 键, 值)

    def tokens(self):
        """留着的词元在原文里的下标。"""
        return [j for j, _, _ in self.items]

    def append(self, k, v):
        """新词元进来：先滤掉它看不见的，再存下它。"""
        t = self.seen
        self.items = [(j, kj, vj) for j, kj, vj in self.items if j < self.n_sink or j > t - self.window]
        self.items.append((t, np.array(k, dtype=float), np.array(v, dtype=float)))
        self.seen = t + 1
        keys = np.stack([kj for _, kj, _ in self.items], axis=1)
        values = np.stack([vj for _, _, vj in self.items], axis=1)
        return keys, values, np.arange(len(self.items))
