# wrong: -inf is not special-cased: while the maximum is -inf, exp(-inf - (-inf)) is nan and poisons the sum
# caught by: test_online_softmax
# severity: edge
# diagnosis: 个 NaN（期望里没有）
# %% online_softmax
def stream_max_and_sum(scores):
    m, total = -math.inf, 0.0
    for x in scores:
        x = float(x)
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
