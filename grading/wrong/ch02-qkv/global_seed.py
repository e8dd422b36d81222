# wrong: seeds NumPy's global generator (np.random.seed + randn): other code changes the weights, and it changes theirs
# caught by: test_self_attention
# severity: essential
# diagnosis: 旧式的 RandomState 生成器
# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        d_v = d_k if d_v is None else d_v
        np.random.seed(seed)
        self.w_q = np.random.randn(d_model, d_k) / np.sqrt(d_model)
        self.w_k = np.random.randn(d_model, d_k) / np.sqrt(d_model)
        self.w_v = np.random.randn(d_model, d_v) / np.sqrt(d_model)

    def forward(self, x):
        q, k, v = qkv_projection(x, self.w_q, self.w_k, self.w_v)
        return anp.scaled_dot_product_attention(q, k, v)
