# wrong: rows and columns swapped: the weight that position t - T + 1 gives to position t, not the other way round
# caught by: test_induction_scores
# severity: essential
# diagnosis: 行和列弄反了
# %% induction_scores
def induction_scores(weights, period):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    if not 1 <= period < n:
        raise ValueError("period 应在 1 到 n - 1 之间")
    t = np.arange(period, n)
    return weights[..., t - period + 1, t].mean(axis=-1)
