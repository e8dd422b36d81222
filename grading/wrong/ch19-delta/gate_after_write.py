# wrong: the gate multiplies the state after the write, so the value just written fades too
# caught by: test_delta_recurrence
# severity: essential
# diagnosis: 门控 α_t 乘在了写完新值之后的状态上
# %% delta_recurrence
def delta_recurrence(q, k, v, beta, alpha=None, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    alpha = np.ones(len(beta)) if alpha is None else np.asarray(alpha)
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else np.array(state)
    out = np.empty((len(q), v.shape[1]))
    for t in range(len(q)):
        s = s + beta[t] * np.outer(k[t], v[t] - k[t] @ s)
        s = alpha[t] * s
        out[t] = q[t] @ s
    return out, s
