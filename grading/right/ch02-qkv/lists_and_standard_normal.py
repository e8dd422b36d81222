# right: returns the projections as a list [q, k, v] (np.matmul), draws the weights as mean + std * standard_normal
# from one generator, and counts the parameters with plain arithmetic per projection
# %% qkv_projection
def qkv_projection(x, w_q, w_k, w_v):
    w_q, w_k, w_v = np.asarray(w_q), np.asarray(w_k), np.asarray(w_v)
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(f"w_q 的形状 {w_q.shape} 与 w_k 的形状 {w_k.shape} 列数不同，查询和键无法做点积")
    return [np.matmul(x, w) for w in (w_q, w_k, w_v)]


# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        if d_v is None:
            d_v = d_k
        rng = np.random.default_rng(seed)
        std = 1.0 / np.sqrt(d_model)
        self.w_q = 0.0 + std * rng.standard_normal((d_model, d_k))
        self.w_k = 0.0 + std * rng.standard_normal((d_model, d_k))
        self.w_v = 0.0 + std * rng.standard_normal((d_model, d_v))

    def forward(self, x):
        q, k, v = qkv_projection(x, self.w_q, self.w_k, self.w_v)
        output, weights = anp.scaled_dot_product_attention(q, k, v)
        return output, weights


# %% count_parameters
def count_parameters(d_model, d_k, d_v=None, *, bias=False):
    d_v = d_k if d_v is None else d_v
    total = 0
    for width in (d_k, d_k, d_v):
        total += d_model * width + (width if bias else 0)
    return total
