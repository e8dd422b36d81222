# wrong: every head gets its own full d_model × d_model projections, so the count grows with the number of heads
# caught by: test_count_parameters
# severity: essential
# diagnosis: 参数随头数成倍增长了
# %% count_parameters
def count_parameters(d_model, n_heads, d_head=None, *, bias=False):
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
        d_head = d_model // n_heads
    per_head = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return int(n_heads * per_head)
