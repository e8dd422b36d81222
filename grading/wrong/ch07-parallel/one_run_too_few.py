# wrong: each form is timed repeats - 1 times instead of repeats (range(1, repeats)): the best of fewer runs
# caught by: test_compare_times
# severity: edge
# diagnosis: 每个 n 上只计时了 repeats − 1 次
# %% compare_times
def compare_times(loop_fn, matrix_fn, ns, *, d=16, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    loop_times, matrix_times = [], []
    for n in ns:
        q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
        if not np.allclose(loop_fn(q, k, v), matrix_fn(q, k, v)):
            raise ValueError(f"n = {n} 时两种写法的结果不同，比较快慢没有意义")
        best = {}
        for name, fn in (("loop", loop_fn), ("matrix", matrix_fn)):
            times = []
            for _ in range(1, repeats):
                start = time.perf_counter()
                fn(q, k, v)
                times.append(time.perf_counter() - start)
            best[name] = min(times)
        loop_times.append(best["loop"])
        matrix_times.append(best["matrix"])
    loop_times, matrix_times = np.array(loop_times), np.array(matrix_times)
    return {"n": np.array(ns), "loop": loop_times, "matrix": matrix_times, "ratio": loop_times / matrix_times}
