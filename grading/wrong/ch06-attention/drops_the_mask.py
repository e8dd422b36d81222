# wrong: forward accepts mask but never passes it on, so a causal layer still looks at the future
# caught by: test_self_attention
# severity: essential
# diagnosis: 输出没有随掩码改变
# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        d_v = d_k if d_v is None else d_v
        rng = np.random.default_rng(seed)
        std = 1 / np.sqrt(d_model)
        self.w_q = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_k = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_v = rng.normal(0.0, std, size=(d_model, d_v))

    def forward(self, x, mask=None):
        q, k, v = anp.qkv_projection(x, self.w_q, self.w_k, self.w_v)
        return scaled_dot_product_attention(q, k, v)
