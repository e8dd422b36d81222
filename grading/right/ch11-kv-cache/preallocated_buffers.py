# right: a cache that preallocates a buffer per layer and doubles it when full (as attnlib's does), returning views
# of the filled part; validation up front
# %% kv_cache
class KVCache:
    def __init__(self, n_layers, n_heads, d_head):
        self.n_layers, self.n_heads, self.d_head = n_layers, n_heads, d_head
        self.buffers = [None] * n_layers  # (keys buffer, values buffer) per layer
        self.filled = [0] * n_layers

    def _check(self, layer, k, v):
        if not isinstance(layer, (int, np.integer)) or layer < 0 or layer >= self.n_layers:
            raise ValueError(f"layer 应在 0 到 {self.n_layers - 1} 之间")
        if k.shape != v.shape or k.ndim < 3 or k.shape[-3] != self.n_heads or k.shape[-1] != self.d_head:
            raise ValueError(f"形状不对：{k.shape} 与 {v.shape}")
        if self.buffers[layer] is not None and self.buffers[layer][0].shape[:-2] != k.shape[:-2]:
            raise ValueError("批量形状与已经存着的不同")

    def append(self, layer, k, v):
        k, v = np.asarray(k), np.asarray(v)
        self._check(layer, k, v)
        t, n = k.shape[-2], self.filled[layer]
        if self.buffers[layer] is None:
            shape = (*k.shape[:-2], max(4, t), self.d_head)
            self.buffers[layer] = (np.empty(shape, dtype=k.dtype), np.empty(shape, dtype=v.dtype))
        kb, vb = self.buffers[layer]
        if n + t > kb.shape[-2]:
            room = max(2 * kb.shape[-2], n + t)
            grown = []
            for old in (kb, vb):
                new = np.empty((*old.shape[:-2], room, self.d_head), dtype=old.dtype)
                new[..., :n, :] = old[..., :n, :]
                grown.append(new)
            kb, vb = self.buffers[layer] = tuple(grown)
        kb[..., n:n + t, :] = k
        vb[..., n:n + t, :] = v
        self.filled[layer] = n + t
        return self.read(layer)

    def read(self, layer):
        if not 0 <= layer < self.n_layers or self.buffers[layer] is None:
            raise ValueError("这一层还没有缓存")
        n = self.filled[layer]
        kb, vb = self.buffers[layer]
        return kb[..., :n, :], vb[..., :n, :]

    @property
    def length(self):
        return min(self.filled)

    @property
    def nbytes(self):
        total = 0
        for layer in range(self.n_layers):
            if self.buffers[layer] is not None:
                keys, values = self.read(layer)
                total += keys.nbytes + values.nbytes
        return total
