# wrong: reports the mean of the repeats, so one run slowed down by something else inflates the time
# caught by: test_compare_times
# severity: edge
# diagnosis: 各次的平均值
# %% compare_times
def compare_times(loop_fn, matrix_fn, ns, *, d=16, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    loop_times, matrix_times = [], []
    for n in ns:
        q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
        if not np.allclose(loop_fn(q, k, v), matrix_fn(q, k, v)):
            raise ValueError("两种写法的结果不同")
        for fn, times in ((loop_fn, loop_times), (matrix_fn, matrix_times)):
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn(q, k, v)
                runs.append(time.perf_counter() - start)
            times.append(sum(runs) / len(runs))
    loop_times, matrix_times = np.array(loop_times), np.array(matrix_times)
    return {"n": np.array(ns), "loop": loop_times, "matrix": matrix_times, "ratio": loop_times / matrix_times}
