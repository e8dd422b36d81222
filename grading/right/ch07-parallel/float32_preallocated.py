# right: float32 throughout, a preallocated output filled row by row, np.matmul, the two forms' repeats interleaved
# %% attention_loop
def attention_row(q_i, k, v):
    q_i, k, v = (np.asarray(a, dtype=np.float32) for a in (q_i, k, v))
    s = np.matmul(k, q_i) * np.float32(1 / np.sqrt(q_i.shape[0]))
    s -= s.max()
    np.exp(s, out=s)
    s /= s.sum()
    return np.matmul(s, v)


def attention_loop(q, k, v):
    q = np.asarray(q, dtype=np.float32)
    out = np.zeros((q.shape[0], np.shape(v)[-1]), dtype=np.float32)
    for i, q_i in enumerate(q):
        out[i, :] = attention_row(q_i, k, v)
    return out


# %% attention_matrix
def attention_matrix(q, k, v):
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (q, k, v))
    s = np.matmul(q, np.swapaxes(k, -2, -1)) / np.float32(np.sqrt(q.shape[-1]))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


# %% compare_times
def compare_times(loop_fn, matrix_fn, ns, *, d=16, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    loop_best = np.full(len(ns), np.inf)
    matrix_best = np.full(len(ns), np.inf)
    for j, n in enumerate(ns):
        q, k, v = rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.standard_normal((n, d))
        if not np.allclose(loop_fn(q, k, v), matrix_fn(q, k, v), rtol=1e-4, atol=1e-6):
            raise ValueError(f"n = {n}：循环形式与矩阵形式的结果不同")
        for _ in range(repeats):  # 两种写法交替运行，机器的忙闲对两者一样
            t0 = time.perf_counter()
            loop_fn(q, k, v)
            t1 = time.perf_counter()
            matrix_fn(q, k, v)
            t2 = time.perf_counter()
            loop_best[j] = min(loop_best[j], t1 - t0)
            matrix_best[j] = min(matrix_best[j], t2 - t1)
    return {"n": np.asarray(ns), "loop": loop_best, "matrix": matrix_best, "ratio": loop_best / matrix_best}
