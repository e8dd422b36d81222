# right: the weights as exp(s - lse), the log-sum-exp of the row and the sink computed with np.logaddexp; the mask
# from np.tril and a band; the cache as three arrays cut with boolean indexing
# %% sink_attention
def sink_attention(q, k, v, sink_logits, mask=None):
    q, k, v = (np.asarray(x) for x in (q, k, v))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    b = np.asarray(sink_logits, dtype=float)[:, None, None]
    m = np.maximum(s.max(axis=-1, keepdims=True), b)
    lse = m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True) + np.exp(b - m))  # log(exp(b) + Σ exp(s))
    weights = np.exp(s - lse)
    return weights @ v, weights
# %% streaming_mask
def streaming_mask(n_q, n_k, n_sink, window):
    if n_q > n_k or window < 1 or n_sink < 0:
        raise ValueError("参数不对")
    causal = np.tril(np.ones((n_k, n_k), dtype=bool))
    band = ~np.tril(np.ones((n_k, n_k), dtype=bool), k=-window)  # 只留 t − j < window
    sinks = np.arange(n_k) < n_sink
    return (causal & (band | sinks[None, :]))[n_k - n_q:]
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

    def tokens(self):
        """留着的词元在原文里的下标。"""
        return [int(j) for j in self.held]

    def append(self, k, v):
        """新词元进来：布尔下标留下它看得见的，再接上它。"""
        k, v = np.asarray(k)[:, None, :], np.asarray(v)[:, None, :]
        if self.seen == 0:
            self.keys, self.values, self.held = k, v, np.array([0])
        else:
            held = np.asarray(self.held)
            stay = (held < self.n_sink) | (self.seen - held < self.window)
            self.keys = np.concatenate([self.keys[:, stay], k], axis=1)
            self.values = np.concatenate([self.values[:, stay], v], axis=1)
            self.held = np.append(held[stay], self.seen)
        self.seen += 1
        return self.keys, self.values, np.arange(self.keys.shape[1])
