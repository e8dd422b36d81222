# wrong: counts the three input projections only and forgets W_O (and b_O)
# caught by: test_count_parameters
# severity: essential
# diagnosis: 没有数 W_O
# %% count_parameters
def count_parameters(d_model, n_heads, d_head=None, *, bias=False):
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
        d_head = d_model // n_heads
    inner = n_heads * d_head
    return int(3 * d_model * inner + (3 * inner if bias else 0))
