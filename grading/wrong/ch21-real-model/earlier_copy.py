# wrong: the score is shifted by one position: the weight on t - T (the earlier copy of the token itself)
# caught by: test_induction_scores
# severity: essential
# diagnosis: 取的是上次出现的位置 t - T
# %% induction_scores
def induction_scores(weights, period):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    if not 1 <= period < n:
        raise ValueError("period 应在 1 到 n - 1 之间")
    t = np.arange(period, n)
    return weights[..., t, t - period].mean(axis=-1)
