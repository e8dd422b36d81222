# wrong: the scores are never converted with float(x): integer scores give an int maximum, not a Python float
# caught by: test_online_softmax
# severity: edge
# diagnosis: ('int', 'float')
# %% online_softmax
def stream_max_and_sum(scores):
    m, total = -math.inf, 0.0
    for x in scores:
        if x == -math.inf:
            continue
        m_new = max(m, x)
        total = total * math.exp(m - m_new) + math.exp(x - m_new)
        m = m_new
    return m, total


def online_softmax(scores):
    x = np.array([float(s) for s in scores])
    m, total = stream_max_and_sum(x)
    if total == 0.0:
        return np.zeros_like(x)
    return np.exp(x - m) / total
