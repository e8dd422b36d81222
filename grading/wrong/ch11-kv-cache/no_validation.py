# wrong: append checks nothing and leaves the errors to np.concatenate: a bad append to a layer that already holds
# data fails inside NumPy, but on an empty layer the bad arrays (wrong heads, d_head, rank, k and v of different
# shapes, layer -1) are stored as they are
# caught by: test_kv_cache
# severity: edge
# diagnosis: 要先检查输入
# %% kv_cache
class KVCache:
    def __init__(self, n_layers, n_heads, d_head):
        self.n_layers, self.n_heads, self.d_head = n_layers, n_heads, d_head
        self.keys = [None] * n_layers
        self.values = [None] * n_layers

    def append(self, layer, k, v):
        k, v = np.array(k), np.array(v)
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = k, v
        else:
            self.keys[layer] = np.concatenate([self.keys[layer], k], axis=-2)
            self.values[layer] = np.concatenate([self.values[layer], v], axis=-2)
        return self.keys[layer], self.values[layer]

    def read(self, layer):
        if self.keys[layer] is None:
            raise ValueError("这一层没有缓存")
        return self.keys[layer], self.values[layer]

    @property
    def length(self):
        return min(0 if k is None else k.shape[-2] for k in self.keys)

    @property
    def nbytes(self):
        return sum(k.nbytes + v.nbytes for k, v in zip(self.keys, self.values, strict=True) if k is not None)
