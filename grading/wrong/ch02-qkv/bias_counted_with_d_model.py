# wrong: gives each bias d_model entries (the input width) instead of the projection's output width
# caught by: test_count_parameters
# severity: essential
# diagnosis: 偏置的长度按 d_model 算了
# %% count_parameters
def count_parameters(d_model, d_k, d_v=None, *, bias=False):
    d_v = d_k if d_v is None else d_v
    total = d_model * (d_k + d_k + d_v)
    if bias:
        total += 3 * d_model
    return total
