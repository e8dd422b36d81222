# right: plain Python loops over nested lists, every result returned as nested lists (weights included)
# %% projections
def projections(x, w_q, w_k, w_v):
    x = np.asarray(x, dtype=float).tolist()

    def times(w):
        w = np.asarray(w, dtype=float).tolist()
        return [[sum(row[i] * w[i][j] for i in range(len(row))) for j in range(len(w[0]))] for row in x]

    return times(w_q), times(w_k), times(w_v)


# %% scaled_scores
def scaled_scores(q, k):
    import math

    q, k = np.asarray(q, dtype=float).tolist(), np.asarray(k, dtype=float).tolist()
    scale = math.sqrt(len(q[0]))
    return [[sum(a * b for a, b in zip(qi, kj, strict=True)) / scale for kj in k] for qi in q]


# %% attention
def attention(q, k, v):
    import math

    v = np.asarray(v, dtype=float).tolist()
    weights = []
    for row in scaled_scores(q, k):
        top = max(row)
        e = [math.exp(s - top) for s in row]
        total = sum(e)
        weights.append([x / total for x in e])
    output = [[sum(w[j] * v[j][c] for j in range(len(v))) for c in range(len(v[0]))] for w in weights]
    return output, weights
