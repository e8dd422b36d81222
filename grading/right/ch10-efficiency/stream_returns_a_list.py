# right: the stream returns a list [m, l]; online_softmax fills a preallocated array in a loop
# %% online_softmax
def stream_max_and_sum(scores):
    m, total = -math.inf, 0.0
    for x in scores:
        x = float(x)
        if x <= m:
            if x > -math.inf:
                total += math.exp(x - m)
        else:  # a new maximum: the old sum is rescaled (it is 0 while m is -inf)
            total = (total * math.exp(m - x) if total else 0.0) + 1.0
            m = x
    return [m, total]


def online_softmax(scores):
    x = np.fromiter((float(s) for s in scores), dtype=float)
    m, total = stream_max_and_sum(iter(x))
    out = np.zeros(len(x))
    if total > 0:
        for j, s in enumerate(x):
            out[j] = math.exp(s - m) / total
    return out
