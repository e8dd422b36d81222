# wrong: the given initial state is updated in place (S = state; S *= α; S -= …; S += …): the outputs are right,
# but the caller's array now holds the last state
# caught by: test_delta_recurrence
# severity: edge
# diagnosis: 没有改动传入的初始状态：未通过
# %% delta_recurrence
def delta_recurrence(q, k, v, beta, alpha=None, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    alpha = np.ones(len(beta)) if alpha is None else np.asarray(alpha)
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else state
    out = np.empty((len(q), v.shape[1]))
    for t in range(len(q)):
        s *= alpha[t]
        s -= beta[t] * np.outer(k[t], k[t] @ s)
        s += beta[t] * np.outer(k[t], v[t])
        out[t] = q[t] @ s
    return out, s
