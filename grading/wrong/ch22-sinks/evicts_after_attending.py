# wrong: the new token is added before anything leaves and the cache is trimmed to n_sink + window only afterwards,
# so each new query sees window + 1 recent tokens (the window counted one long)
# caught by: test_sink_cache
# severity: essential
# diagnosis: 窗口多留了一个
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
        """先存下新词元并返回全部，下次进来之前才剪到 n_sink + window 个。"""
        t = self.seen
        if len(self.held) >= self.n_sink + self.window:  # 上一步之后才剪：多留了一个
            stay = [i for i, j in enumerate(self.held) if j < self.n_sink or t - j <= self.window]
            self.keys = [self.keys[i] for i in stay]
            self.values = [self.values[i] for i in stay]
            self.held = [self.held[i] for i in stay]
        self.keys.append(np.asarray(k))
        self.values.append(np.asarray(v))
        self.held.append(t)
        self.seen += 1
        return np.stack(self.keys, axis=1), np.stack(self.values, axis=1), np.arange(len(self.held))
