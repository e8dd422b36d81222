# right: einsum over any batch dimensions computed in float32 (right within float32 precision), the weights drawn
# in a loop with setattr and kept in float32, the parameters counted from the shapes of the matrices
# %% qkv_projection
def qkv_projection(x, w_q, w_k, w_v):
    if np.shape(w_q)[-1] != np.shape(w_k)[-1]:
        raise ValueError(f"查询和键的宽度不同：w_q {np.shape(w_q)}，w_k {np.shape(w_k)}")
    x = np.asarray(x, dtype=np.float32)
    return tuple(np.einsum("...nd,de->...ne", x, np.asarray(w, dtype=np.float32)) for w in (w_q, w_k, w_v))


# %% self_attention
class SelfAttention:
    def __init__(self, d_model, d_k, d_v=None, *, seed=0):
        rng = np.random.default_rng(seed)
        widths = {"w_q": d_k, "w_k": d_k, "w_v": d_k if d_v is None else d_v}
        for name, width in widths.items():
            setattr(self, name, rng.normal(0.0, d_model ** -0.5, size=(d_model, width)).astype(np.float32))

    def forward(self, x):
        return anp.scaled_dot_product_attention(*qkv_projection(x, self.w_q, self.w_k, self.w_v))


# %% count_parameters
def count_parameters(d_model, d_k, d_v=None, *, bias=False):
    widths = [d_k, d_k, d_k if d_v is None else d_v]
    shapes = [(d_model, w) for w in widths] + ([(w,) for w in widths] if bias else [])
    return sum(int(np.prod(shape)) for shape in shapes)
