# wrong: a fresh default_rng(seed) for every matrix, so w_q == w_k and the scores become symmetric
# caught by: test_self_attention
# severity: essential
# diagnosis: 抽 w_k 时又创建了一次 default_rng(seed)
# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        d_v = d_k if d_v is None else d_v
        std = 1 / np.sqrt(d_model)
        self.w_q = np.random.default_rng(seed).normal(0.0, std, size=(d_model, d_k))
        self.w_k = np.random.default_rng(seed).normal(0.0, std, size=(d_model, d_k))
        self.w_v = np.random.default_rng(seed).normal(0.0, std, size=(d_model, d_v))

    def forward(self, x):
        q, k, v = qkv_projection(x, self.w_q, self.w_k, self.w_v)
        return anp.scaled_dot_product_attention(q, k, v)
