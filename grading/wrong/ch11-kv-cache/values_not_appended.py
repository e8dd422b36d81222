# wrong: the keys are appended but the values are replaced: the cache returns every key and only the newest values
# caught by: test_kv_cache
# severity: essential
# diagnosis: append 把这一层原有的值换掉了
# %% kv_cache
class KVCache:
    def __init__(self, n_layers, n_heads, d_head):
        self.n_layers, self.n_heads, self.d_head = n_layers, n_heads, d_head
        self.keys = [None] * n_layers
        self.values = [None] * n_layers

    def append(self, layer, k, v):
        if not 0 <= layer < self.n_layers:
            raise ValueError("layer 超出范围")
        k, v = np.asarray(k), np.asarray(v)
        if k.shape != v.shape or k.ndim < 3 or k.shape[-3] != self.n_heads or k.shape[-1] != self.d_head:
            raise ValueError("形状不对")
        if self.keys[layer] is None:
            self.keys[layer] = k.copy()
        else:
            if self.keys[layer].shape[:-2] != k.shape[:-2]:
                raise ValueError("批量形状不同")
            self.keys[layer] = np.concatenate([self.keys[layer], k], axis=-2)
        self.values[layer] = v.copy()  # 值没有追加
        return self.keys[layer], self.values[layer]

    def read(self, layer):
        if not 0 <= layer < self.n_layers or self.keys[layer] is None:
            raise ValueError("这一层没有缓存")
        return self.keys[layer], self.values[layer]

    @property
    def length(self):
        return min(0 if k is None else k.shape[-2] for k in self.keys)

    @property
    def nbytes(self):
        return sum(k.nbytes + v.nbytes for k, v in zip(self.keys, self.values, strict=True) if k is not None)
