# right: rows gathered in a list and stacked, their own exp/sum softmax, einsum for the matrix form, timings in lists
# %% attention_loop
def attention_row(q_i, k, v):
    q_i, k, v = np.asarray(q_i, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    scores = np.array([np.dot(key, q_i) for key in k]) / np.sqrt(len(q_i))
    e = np.exp(scores - scores.max())
    weights = e / e.sum()
    return np.einsum("j,jd->d", weights, v)


def attention_loop(q, k, v):
    rows = []
    for q_i in np.asarray(q, dtype=float):
        rows.append(attention_row(q_i, k, v))
    return np.stack(rows)


# %% attention_matrix
def attention_matrix(q, k, v):
    q, k, v = np.asarray(q, dtype=float), np.asarray(k, dtype=float), np.asarray(v, dtype=float)
    scores = np.einsum("...id,...jd->...ij", q, k) / np.sqrt(q.shape[-1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("...ij,...jd->...id", e / e.sum(axis=-1, keepdims=True), v)


# %% compare_times
def compare_times(loop_fn, matrix_fn, ns, *, d=16, repeats=5, seed=0):
    def best_time(fn, q, k, v):
        runs = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn(q, k, v)
            runs.append(time.perf_counter() - start)
        return min(runs)

    rng = np.random.default_rng(seed)
    found = {"n": [], "loop": [], "matrix": []}
    for n in ns:
        q = rng.standard_normal((n, d))
        k = rng.standard_normal((n, d))
        v = rng.standard_normal((n, d))
        if not np.allclose(loop_fn(q, k, v), matrix_fn(q, k, v)):
            raise ValueError("n = " + str(n) + " 时两种写法的结果不同")
        found["n"].append(n)
        found["loop"].append(best_time(loop_fn, q, k, v))
        found["matrix"].append(best_time(matrix_fn, q, k, v))
    result = {key: np.array(values) for key, values in found.items()}
    result["ratio"] = result["loop"] / result["matrix"]
    return result
