# wrong: right values, but the stream is stored and read twice (max, then sum): memory grows with it
# caught by: test_online_softmax
# severity: essential
# diagnosis: 不随分数的个数增长（没有把分数存下来）：未通过
# %% online_softmax
def stream_max_and_sum(scores):
    x = np.array([float(s) for s in scores])
    if x.size == 0 or np.all(x == -math.inf):
        return -math.inf, 0.0
    m = float(x.max())
    return m, float(np.exp(x - m).sum())


def online_softmax(scores):
    x = np.array([float(s) for s in scores])
    m, total = stream_max_and_sum(x)
    if total == 0.0:
        return np.zeros_like(x)
    return np.exp(x - m) / total
