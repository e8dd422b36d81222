# wrong: every chunk starts from a zero state: right inside the first chunk, the later chunks forget the past
# caught by: test_chunked_delta
# severity: essential
# diagnosis: 每一块都从零状态开始了
# %% chunked_delta
def chunked_delta(q, k, v, beta, chunk_size, state=None):
    q, k, v, beta = (np.asarray(a) for a in (q, k, v, beta))
    start_state = np.zeros((k.shape[1], v.shape[1])) if state is None else np.array(state)
    outs = []
    for start in range(0, len(q), chunk_size):
        part = slice(start, start + chunk_size)
        qc, kc, vc, bc = q[part], k[part], v[part], beta[part]
        s = start_state if start == 0 else np.zeros_like(start_state)  # the chunk's own memory only
        a = np.tril(bc[:, None] * (kc @ kc.T), -1)
        d = np.linalg.solve(np.eye(len(kc)) + a, bc[:, None] * (vc - kc @ s))
        outs.append(qc @ s + np.tril(qc @ kc.T) @ d)
        s = s + kc.T @ d
    return np.concatenate(outs), s
