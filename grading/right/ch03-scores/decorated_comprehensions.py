# right: each function wrapped in a call-counting decorator made with functools.wraps; the loops written as list
# comprehensions and generator expressions; einsum for the batched product; the ranking with sorted()
# %% scores_double_loop
import functools

calls = {}


def counted(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        calls[func.__name__] = calls.get(func.__name__, 0) + 1
        return func(*args, **kwargs)
    return wrapper


@counted
def scores_double_loop(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：q {q.shape}，k {k.shape}")
    return np.array([[float(q_i @ k_j) for k_j in k] for q_i in q]).reshape(len(q), len(k))


# %% scores_one_loop
@counted
def scores_one_loop(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：q {q.shape}，k {k.shape}")
    return np.stack(tuple(k @ q_i for q_i in q))


# %% scores_matrix
@counted
def scores_matrix(q, k):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"d_k 不同：q {q.shape}，k {k.shape}")
    return np.einsum("...id,...jd->...ij", q, k)


# %% rank_keys
@counted
def rank_keys(q, k, by="dot"):
    q, k = np.asarray(q, dtype=float), np.asarray(k, dtype=float)
    if by not in ("dot", "cosine"):
        raise ValueError(f"by 只能是 'dot' 或 'cosine'，收到 {by!r}")
    scores = k @ q
    if by == "cosine":
        scores = scores / np.sqrt((k * k).sum(axis=1)) / np.sqrt(q @ q)
    return np.array(sorted(range(len(k)), key=lambda j: -scores[j]), dtype=int)
