# wrong: one pair of arrays for every layer: whichever layer appends, its keys and values join the same arrays
# caught by: test_kv_cache
# severity: essential
# diagnosis: 各层共用了一份缓存
# %% kv_cache
class KVCache:
    def __init__(self, n_layers, n_heads, d_head):
        self.n_layers, self.n_heads, self.d_head = n_layers, n_heads, d_head
        self.keys, self.values = None, None
        self.counts = [0] * n_layers  # 每层追加过的词元数

    def append(self, layer, k, v):
        if not 0 <= layer < self.n_layers:
            raise ValueError("layer 超出范围")
        k, v = np.asarray(k), np.asarray(v)
        if k.shape != v.shape or k.ndim < 3 or k.shape[-3] != self.n_heads or k.shape[-1] != self.d_head:
            raise ValueError("形状不对")
        if self.keys is None:
            self.keys, self.values = k.copy(), v.copy()
        else:
            if self.keys.shape[:-2] != k.shape[:-2]:
                raise ValueError("批量形状不同")
            self.keys = np.concatenate([self.keys, k], axis=-2)
            self.values = np.concatenate([self.values, v], axis=-2)
        self.counts[layer] += k.shape[-2]
        return self.keys, self.values

    def read(self, layer):
        if not 0 <= layer < self.n_layers or self.counts[layer] == 0:
            raise ValueError("这一层没有缓存")
        return self.keys, self.values

    @property
    def length(self):
        return min(self.counts)

    @property
    def nbytes(self):
        return 0 if self.keys is None else self.keys.nbytes + self.values.nbytes
