# wrong: when the maximum grows, the old sum is not multiplied by exp(m_old - m_new)
# caught by: test_online_softmax
# severity: essential
# diagnosis: 旧的和没有乘以
# %% online_softmax
def stream_max_and_sum(scores):
    m, total = -math.inf, 0.0
    for x in scores:
        x = float(x)
        if x == -math.inf:
            continue
        m = max(m, x)
        total = total + math.exp(x - m)
    return m, total


def online_softmax(scores):
    x = np.array([float(s) for s in scores])
    m, total = stream_max_and_sum(x)
    if total == 0.0:
        return np.zeros_like(x)
    return np.exp(x - m) / total
