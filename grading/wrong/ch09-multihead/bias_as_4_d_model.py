# wrong: the four bias vectors counted as 4 × d_model: right only when n_heads · d_head equals d_model
# caught by: test_count_parameters
# severity: edge
# diagnosis: 偏置按 4 × d_model 计算了
# %% count_parameters
def count_parameters(d_model, n_heads, d_head=None, *, bias=False):
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
        d_head = d_model // n_heads
    total = 4 * d_model * n_heads * d_head
    if bias:
        total += 4 * d_model
    return int(total)
