# right: perf_counter imported by name at the top of the cell, the best time kept as a running minimum, no list
# %% compare_times
from time import perf_counter


def compare_times(loop_fn, matrix_fn, ns, *, d=16, repeats=5, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for n in ns:
        q = rng.standard_normal((n, d))
        k = rng.standard_normal((n, d))
        v = rng.standard_normal((n, d))
        if not np.allclose(loop_fn(q, k, v), matrix_fn(q, k, v)):
            raise ValueError(f"n = {n}：两种写法的结果不同")
        best = []
        for fn in (loop_fn, matrix_fn):
            shortest = float("inf")
            for _ in range(repeats):
                begin = perf_counter()
                fn(q, k, v)
                shortest = min(shortest, perf_counter() - begin)
            best.append(shortest)
        rows.append((n, *best))
    n_col, loop_col, matrix_col = (np.array(col) for col in zip(*rows, strict=True))
    return {"n": n_col, "loop": loop_col, "matrix": matrix_col, "ratio": loop_col / matrix_col}
