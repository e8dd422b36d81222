# wrong: counts W_V as d_model x d_k (3 * d_model * d_k), right only when d_v == d_k
# caught by: test_count_parameters
# severity: essential
# diagnosis: 把 W_V 也当成了 d_model × d_k
# %% count_parameters
def count_parameters(d_model, d_k, d_v=None, *, bias=False):
    total = 3 * d_model * d_k
    if bias:
        total += 3 * d_k
    return total
