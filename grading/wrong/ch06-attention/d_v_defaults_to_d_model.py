# wrong: an omitted d_v is read as the model width, so w_v comes out (d_model, d_model) instead of (d_model, d_k)
# caught by: test_self_attention
# severity: edge
# diagnosis: d_v 省略时 w_v 的宽度取了 d_model
# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        d_v = d_model if d_v is None else d_v
        rng = np.random.default_rng(seed)
        std = 1 / np.sqrt(d_model)
        self.w_q = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_k = rng.normal(0.0, std, size=(d_model, d_k))
        self.w_v = rng.normal(0.0, std, size=(d_model, d_v))

    def forward(self, x, mask=None):
        q, k, v = anp.qkv_projection(x, self.w_q, self.w_k, self.w_v)
        return scaled_dot_product_attention(q, k, v, mask=mask)
