# wrong: the mean is taken over the whole diagonal t - T + 1, from t = T - 1 on, which includes a first-pass query
# caught by: test_induction_scores
# severity: essential
# diagnosis: 从位置 T - 1 起就算了
# %% induction_scores
def induction_scores(weights, period):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    if not 1 <= period < n:
        raise ValueError("period 应在 1 到 n - 1 之间")
    return np.diagonal(weights, offset=-(period - 1), axis1=-2, axis2=-1).mean(axis=-1)
