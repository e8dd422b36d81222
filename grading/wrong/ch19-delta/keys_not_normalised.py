# wrong: the queries are normalised but the keys go into the delta rule as projected, of any length
# caught by: test_gated_delta_layer
# severity: essential
# diagnosis: 键没有归一化
# %% gated_delta_layer
def gated_delta_layer(x, weights):
    x = np.asarray(x)
    q, k = unit_rows(x @ weights["w_q"]), x @ weights["w_k"]
    beta = 1 / (1 + np.exp(-(x @ weights["w_beta"])))
    alpha = 1 / (1 + np.exp(-(x @ weights["w_alpha"])))
    out, _ = delta_recurrence(q, k, x @ weights["w_v"], beta, alpha)
    return out @ weights["w_o"]
