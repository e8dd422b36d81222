# wrong: a first-in first-out cache of n_sink + window tokens: once it is full the sinks leave too (a plain window)
# caught by: test_sink_cache
# severity: essential
# diagnosis: 汇聚点也被挤掉了
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
        """存下新词元，超出容量时丢掉最旧的。"""
        self.keys.append(np.asarray(k))
        self.values.append(np.asarray(v))
        self.held.append(self.seen)
        self.seen += 1
        capacity = self.n_sink + self.window
        self.keys, self.values, self.held = self.keys[-capacity:], self.values[-capacity:], self.held[-capacity:]
        return np.stack(self.keys, axis=1), np.stack(self.values, axis=1), np.arange(len(self.held))
