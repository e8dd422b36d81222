# wrong: beta scales the erase only; the new value is written in full
# caught by: test_delta_recurrence
# severity: essential
# diagnosis: β_t 只乘在了擦除上
# %% delta_recurrence
def delta_recurrence(q, k, v, beta, alpha=None, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    alpha = np.ones(len(beta)) if alpha is None else np.asarray(alpha)
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else np.array(state)
    out = np.empty((len(q), v.shape[1]))
    for t in range(len(q)):
        s = alpha[t] * s
        s = s - beta[t] * np.outer(k[t], k[t] @ s) + np.outer(k[t], v[t])
        out[t] = q[t] @ s
    return out, s
