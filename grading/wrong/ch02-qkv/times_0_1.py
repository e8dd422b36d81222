# wrong: the often-seen "standard normal times 0.1" initialisation, whose scale ignores d_model
# caught by: test_self_attention
# severity: essential
# diagnosis: 标准差应为 1/√d_model
# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        d_v = d_k if d_v is None else d_v
        rng = np.random.default_rng(seed)
        self.w_q = rng.standard_normal((d_model, d_k)) * 0.1
        self.w_k = rng.standard_normal((d_model, d_k)) * 0.1
        self.w_v = rng.standard_normal((d_model, d_v)) * 0.1

    def forward(self, x):
        q, k, v = qkv_projection(x, self.w_q, self.w_k, self.w_v)
        return anp.scaled_dot_product_attention(q, k, v)
