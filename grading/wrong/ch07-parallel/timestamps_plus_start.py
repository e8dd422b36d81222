# wrong: each run is recorded as perf_counter() + start, a sum of two clock readings, not their difference: the
#   "times" are moments of the clock and the ratio compares two moments (close to 1 whatever the two forms cost)
# caught by: test_compare_times
# severity: essential
# diagnosis: 记下的是结束时刻加开始时刻
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
            for _ in range(repeats):
                start = time.perf_counter()
                fn(q, k, v)
                times.append(time.perf_counter() + start)
            best[name] = min(times)
        loop_times.append(best["loop"])
        matrix_times.append(best["matrix"])
    loop_times, matrix_times = np.array(loop_times), np.array(matrix_times)
    return {"n": np.array(ns), "loop": loop_times, "matrix": matrix_times, "ratio": loop_times / matrix_times}
