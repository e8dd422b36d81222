# wrong: the state is carried from chunk to chunk, but a chunk's output leaves out Q S, so its queries never read
# what the earlier chunks wrote (the first chunk, starting from a zero state, is right)
# caught by: test_chunked_delta
# severity: essential
# diagnosis: 输出漏掉了 Q S 这一项
# %% chunked_delta
def chunked_delta(q, k, v, beta, chunk_size, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    s = np.zeros((k.shape[1], v.shape[1])) if state is None else np.array(state)
    outs = []
    for start in range(0, len(q), chunk_size):
        part = slice(start, start + chunk_size)
        qc, kc, vc, bc = q[part], k[part], v[part], beta[part]
        a = np.tril(bc[:, None] * (kc @ kc.T), -1)
        d = np.linalg.solve(np.eye(len(kc)) + a, bc[:, None] * (vc - kc @ s))
        outs.append(np.tril(qc @ kc.T) @ d)
        s = s + kc.T @ d
    return np.concatenate(outs), s
