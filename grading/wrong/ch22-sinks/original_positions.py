# wrong: the cache keeps the right tokens but hands RoPE their original indices instead of their slots in the cache
# caught by: test_sink_cache
# severity: essential
# diagnosis: 交给 RoPE 的是原文下标
# %% sink_cache
class SinkCache:
    """带汇聚点的滚动 KV 缓存（一层）。

    参数
    ----
    n_sink : int
        汇聚点的个数。
    window : int
        窗口大小。
    """

    def __init__(self, n_sink, window):
        if n_sink < 0 or window < 1:
            raise ValueError("参数不对")
        self.n_sink, self.window = n_sink, window
        self.keys, self.values, self.held = [], [], []
        self.seen = 0

    def tokens(self):
        """留着的词元在原文里的下标。"""
        return list(self.held)

    def append(self, k, v):
        """存下新词元，让它看不见的离开；位置用原文下标。"""
        t = self.seen
        stay = [i for i, j in enumerate(self.held) if j < self.n_sink or t - j < self.window]
        self.keys = [self.keys[i] for i in stay] + [np.asarray(k)]
        self.values = [self.values[i] for i in stay] + [np.asarray(v)]
        self.held = [self.held[i] for i in stay] + [t]
        self.seen += 1
        return np.stack(self.keys, axis=1), np.stack(self.values, axis=1), np.array(self.held)
