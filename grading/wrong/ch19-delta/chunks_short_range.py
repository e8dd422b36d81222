# wrong: the chunk loop stops one step early (range(0, n - 1, chunk_size)): right whenever a chunk starts before
# the last step, but when the last chunk is a single step it is never computed and the output is one row short
# caught by: test_chunked_delta
# severity: essential
# diagnosis: 形状不对：期望 (13, 3)，实际 (12, 3)
# %% chunked_delta
def chunked_delta(q, k, v, beta, chunk_size, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else np.array(state)
    outs = []
    for start in range(0, len(q) - 1, chunk_size):
        part = slice(start, start + chunk_size)
        qc, kc, vc, bc = q[part], k[part], v[part], beta[part]
        a = np.tril(bc[:, None] * (kc @ kc.T), -1)
        d = np.linalg.solve(np.eye(len(kc)) + a, bc[:, None] * (vc - kc @ s))
        outs.append(qc @ s + np.tril(qc @ kc.T) @ d)
        s = s + kc.T @ d
    return np.concatenate(outs), s
