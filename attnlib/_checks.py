"""Backend-independent input checks shared by ``attnlib.numpy`` and ``attnlib.torch``.

The checks work on shapes (tuples) and dtype *kinds* only, so both backends
raise the same errors with the same messages.  Messages are Chinese first
(learners read them in the notebooks) with the English key phrase after it.
"""

from __future__ import annotations

import math

# dtype kinds, named as numpy's ``dtype.kind``: b=bool, i/u=integer, f=float, c=complex
_KIND_NAMES = {"b": "布尔 (bool)", "i": "整数 (integer)", "u": "无符号整数 (unsigned integer)",
               "c": "复数 (complex)", "f": "浮点 (float)"}


def check_float_kind(name: str, kind: str, dtype) -> None:
    """Raise ``TypeError`` unless ``kind`` is a real floating-point kind."""
    if kind != "f":
        what = _KIND_NAMES.get(kind, str(dtype))
        raise TypeError(
            f"{name} 必须是实数浮点数组，收到的是 {what} 类型 dtype={dtype} "
            f"(expected a real floating-point array)。请先转换，例如 x.astype(float)。")


def check_same_dtype(named_dtypes: dict) -> None:
    """Raise ``TypeError`` when the given arrays do not share one dtype."""
    if len({str(d) for d in named_dtypes.values()}) > 1:
        listing = ", ".join(f"{n}.dtype={d}" for n, d in named_dtypes.items())
        raise TypeError(f"输入的 dtype 不一致 (dtype mismatch): {listing}；请先统一为同一种浮点类型。")


def check_min_ndim(name: str, shape: tuple, ndim: int = 2) -> None:
    """Raise ``ValueError`` if an array has fewer than ``ndim`` dimensions."""
    if len(shape) < ndim:
        raise ValueError(f"{name} 至少需要 {ndim} 维 (..., n, d)，收到 shape={shape} "
                         f"(expected at least {ndim} dimensions)。")


def broadcast_batch(named_shapes: dict) -> tuple:
    """Broadcast the leading (batch/head) dimensions of several ``(..., n, d)`` shapes.

    Returns the broadcast batch shape; raises ``ValueError`` naming every shape
    when they are incompatible.
    """
    batches = {n: s[:-2] for n, s in named_shapes.items()}
    try:
        return broadcast_shapes(*batches.values())
    except ValueError:
        listing = ", ".join(f"{n}.shape={s}" for n, s in named_shapes.items())
        raise ValueError(f"前导的批量/头维度无法广播 (batch dimensions do not broadcast): {listing}") from None


def broadcast_shapes(*shapes: tuple) -> tuple:
    """NumPy broadcasting rules on plain tuples (no array library needed)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def check_qkv(q_shape: tuple, k_shape: tuple, v_shape: tuple) -> tuple:
    """Check q ``(..., n_q, d_k)``, k ``(..., n_k, d_k)``, v ``(..., n_k, d_v)``.

    Returns the broadcast batch shape.
    """
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        check_min_ndim(name, shape)
    _check_width_and_length(q_shape, k_shape, v_shape)
    return broadcast_batch({"q": q_shape, "k": k_shape, "v": v_shape})


def _check_width_and_length(q_shape: tuple, k_shape: tuple, v_shape: tuple) -> None:
    """q and k share their last dimension d_k; k and v hold as many positions."""
    if q_shape[-1] != k_shape[-1]:
        raise ValueError(f"q 与 k 的最后一维 d_k 必须相同 (d_k mismatch): "
                         f"q.shape={q_shape} 的 d_k={q_shape[-1]}，k.shape={k_shape} 的 d_k={k_shape[-1]}。")
    if k_shape[-2] != v_shape[-2]:
        raise ValueError(f"k 与 v 的序列长度必须相同 (key/value length mismatch): "
                         f"k.shape={k_shape} 有 {k_shape[-2]} 个键，v.shape={v_shape} 有 {v_shape[-2]} 个值。")


def check_step_query(q_shape: tuple, k_shape: tuple) -> tuple:
    """A decoding step has one query per new key: q ``(..., t_new, d)`` against k ``(..., t_new, d)``.

    Returns the broadcast batch shape.
    """
    check_min_ndim("q", q_shape)
    check_min_ndim("k", k_shape)
    if tuple(q_shape[-2:]) != tuple(k_shape[-2:]):
        raise ValueError(f"每个新位置一个查询：q 与新的 k 的最后两维必须相同 (one query per new key): "
                         f"q.shape={q_shape}，k.shape={k_shape}。")
    return broadcast_batch({"q": q_shape, "k": k_shape})


def check_mask(mask_shape: tuple, mask_kind: str, mask_dtype, target: tuple, what: str = "注意力分数") -> None:
    """A mask must be boolean and broadcast to ``target`` without enlarging it."""
    if mask_kind != "b":
        raise TypeError(f"mask 必须是布尔数组 (mask must be boolean)，True 表示可以关注；收到 dtype={mask_dtype}。"
                        f"加性掩码 (0/-inf) 请先转换：mask = (additive == 0)。")
    try:
        ok = broadcast_shapes(mask_shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"mask.shape={mask_shape} 无法广播到{what}的形状 {tuple(target)} "
                         f"(mask cannot broadcast to {tuple(target)})。")


def check_positive(name: str, value, meaning: str = "") -> float:
    """``value`` as a float; ``TypeError`` unless it is a real number, ``ValueError`` unless finite and > 0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} 必须是实数 ({name} must be a real number)，收到 {value!r}。") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{name} {meaning}必须是大于 0 的有限数 ({name} must be > 0)，收到 {value!r}。")
    return x


def check_temperature(temperature) -> float:
    """Temperature must be a finite real number > 0."""
    return check_positive("temperature", temperature)


def check_axis(axis: int, ndim: int) -> int:
    """Normalise ``axis`` for an array of ``ndim`` dimensions."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"axis 必须是整数 (axis must be an int)，收到 {axis!r}。")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis={axis} 超出范围：数组只有 {ndim} 维 (axis out of range)。")
    return axis % ndim


def check_scale(scale, d_k: int) -> float:
    """``scale=True`` means 1/sqrt(d_k), ``False`` means 1, a positive number is used as is."""
    if scale is True:
        return 1.0 / math.sqrt(d_k)
    if scale is False:
        return 1.0
    try:
        s = float(scale)
    except (TypeError, ValueError):
        raise TypeError(f"scale 必须是 True/False 或正数 (scale must be bool or a number)，收到 {scale!r}。") from None
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"scale 必须是大于 0 的有限数 (scale must be > 0)，收到 {scale!r}。")
    return s


def check_heads(d_model: int, n_heads) -> int:
    """``n_heads`` must be a positive int dividing the model width."""
    if not isinstance(n_heads, int) or isinstance(n_heads, bool) or n_heads < 1:
        raise ValueError(f"n_heads 必须是正整数 (n_heads must be a positive int)，收到 {n_heads!r}。")
    if d_model % n_heads:
        raise ValueError(f"模型宽度 d_model={d_model} 不能被头数 n_heads={n_heads} 整除 "
                         f"(n_heads must divide the model width)。")
    return d_model // n_heads


def check_matrix(name: str, shape: tuple, rows: int, cols: int | None = None) -> None:
    """A projection matrix must be ``(rows, cols)`` (``cols=None``: any width)."""
    ok = len(shape) == 2 and shape[0] == rows and (cols is None or shape[1] == cols)
    if not ok:
        want = f"({rows}, {cols if cols is not None else 'd'})"
        raise ValueError(f"{name} 的形状应为 {want}，收到 {name}.shape={shape} (projection shape mismatch)。")


def check_vector(name: str, shape: tuple, size: int) -> None:
    """A bias must be a vector of length ``size``."""
    if tuple(shape) != (size,):
        raise ValueError(f"{name} 的形状应为 ({size},)，收到 {name}.shape={tuple(shape)} (bias shape mismatch)。")


def check_lengths(lengths: list, n_k: int) -> None:
    """Every padding length must be an integer in ``[0, n_k]``."""
    bad = [n for n in lengths if not 0 <= n <= n_k]
    if bad:
        raise ValueError(f"padding 长度必须在 [0, n_k={n_k}] 之内，收到 {bad} (length out of range)。")


def check_sizes(**sizes) -> None:
    """Sequence sizes must be non-negative ints."""
    for name, n in sizes.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"{name} 必须是非负整数 (must be a non-negative int)，收到 {n!r}。")


def check_block_size(block_size) -> tuple[int, int]:
    """A block size is a positive int (rows = keys) or a pair ``(rows, keys)`` of them."""
    sizes = (block_size, block_size) if isinstance(block_size, int) else block_size
    try:
        sizes = tuple(sizes)
    except TypeError:
        sizes = ()
    if len(sizes) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in sizes):
        raise ValueError(f"block_size 必须是正整数或两个正整数 (rows, keys)，收到 {block_size!r} "
                         f"(block_size must be a positive int or a pair of them)。")
    return sizes


def check_no_zero_vector(name: str, has_zero: bool) -> None:
    """A cosine needs a direction: raise ``ValueError`` when some row of ``name`` is the zero vector."""
    if has_zero:
        raise ValueError(f"{name} 含有零向量：零向量没有方向，余弦相似度没有定义 "
                         f"(zero vector in {name}: the cosine is undefined)。")


def check_count(name: str, n, minimum: int = 1) -> int:
    """A size such as ``d_k`` or ``n_samples`` must be an int of at least ``minimum``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < minimum:
        raise ValueError(f"{name} 必须是不小于 {minimum} 的整数 (must be an int >= {minimum})，收到 {n!r}。")
    return n


def check_layer(layer, n_layers: int) -> int:
    """A cache's layer index: an int in ``0 .. n_layers - 1`` (``True`` is not a layer)."""
    if not isinstance(layer, int) or isinstance(layer, bool) or not 0 <= layer < n_layers:
        raise ValueError(f"layer 必须是 0 到 {n_layers - 1} 之间的整数 (layer out of range)，收到 {layer!r}。")
    return layer


def check_seed(seed) -> int:
    """A random seed must be a non-negative int (both backends accept the same seeds)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed 必须是非负整数 (seed must be a non-negative int)，收到 {seed!r}。")
    return seed


def check_std(name: str, std) -> float:
    """A standard deviation must be a finite real number > 0."""
    return check_positive(name, std, "是标准差，")


def check_same_shape(named_shapes: dict) -> None:
    """Raise ``ValueError`` unless every array has the same shape (no broadcasting)."""
    if len({tuple(s) for s in named_shapes.values()}) > 1:
        listing = ", ".join(f"{n}.shape={tuple(s)}" for n, s in named_shapes.items())
        raise ValueError(f"这些输入的形状必须完全相同 (shape mismatch): {listing}。")


def check_weights(has_bad: bool) -> None:
    """Attention weights are probabilities: raise ``ValueError`` on a negative, NaN or infinite entry."""
    if has_bad:
        raise ValueError("weights 含有负数、NaN 或 inf：注意力权重应当是 softmax 的输出，"
                         "每个元素在 [0, 1] 之内 (weights must be finite and non-negative)。")


def check_self_attention(q_shape: tuple, k_shape: tuple) -> int:
    """Self-attention needs as many queries as keys; returns that length n."""
    if q_shape[-2] != k_shape[-2]:
        raise ValueError(f"这里是自注意力，查询与键的个数必须相同 (self-attention needs n_q == n_k)："
                         f"q.shape={q_shape}，k.shape={k_shape}。")
    return q_shape[-2]


def check_window(window) -> int:
    """A window is a positive int (the query's own position included)."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(f"window 必须是正整数 (window must be an int >= 1)，收到 {window!r}。")
    return window


def check_positions(name: str, positions, n: int):
    """Distinct integer positions in ``[0, n)``, returned sorted as a NumPy int array."""
    import numpy as np

    arr = np.asarray(positions if len(positions) else [], dtype=object)
    if arr.ndim != 1 or not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in arr):
        raise TypeError(f"{name} 必须是一串整数位置 (a sequence of int positions)，收到 {positions!r}。")
    arr = np.asarray(sorted(int(p) for p in arr), dtype=np.int64)
    bad = [int(p) for p in arr if not 0 <= p < n]
    if bad or len(set(arr.tolist())) != arr.size:
        raise ValueError(f"{name} 的位置必须互不相同且在 [0, {n}) 之内 (positions must be distinct and in range)，"
                         f"收到 {list(positions)!r}。")
    return arr


def check_groups(q_shape: tuple, k_shape: tuple, v_shape: tuple) -> tuple[tuple, int]:
    """Grouped-query attention: q ``(..., h, n_q, d_k)``, k ``(..., h_kv, n_k, d_k)``, v ``(..., h_kv, n_k, d_v)``.

    ``h_kv`` must divide ``h``.  Returns ``(broadcast batch shape without the heads, h // h_kv)``.
    """
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        check_min_ndim(name, shape, 3)
    h, h_kv = q_shape[-3], k_shape[-3]
    if v_shape[-3] != h_kv:
        raise ValueError(f"k 与 v 的键/值头数必须相同 (key/value heads mismatch)：k.shape={k_shape} 有 {h_kv} 个头，"
                         f"v.shape={v_shape} 有 {v_shape[-3]} 个头。")
    if h % h_kv:
        raise ValueError(f"查询头数 h={h} 必须是键/值头数 h_kv={h_kv} 的整数倍 (h_kv must divide h)："
                         f"q.shape={q_shape}，k.shape={k_shape}。")
    _check_width_and_length(q_shape, k_shape, v_shape)
    batch = broadcast_batch({"q": q_shape[:-1], "k": k_shape[:-1], "v": v_shape[:-1]})  # leading dims, heads dropped
    return batch, h // h_kv


def check_kv_heads(n_heads: int, n_kv_heads) -> int:
    """A cache's key/value heads: ``None`` means one per query head (multi-head attention); else a divisor of
    ``n_heads``."""
    if n_kv_heads is None:
        return n_heads
    n_kv_heads = check_count("n_kv_heads", n_kv_heads)
    if n_heads % n_kv_heads:
        raise ValueError(f"查询头数 n_heads={n_heads} 必须是键/值头数 n_kv_heads={n_kv_heads} 的整数倍 "
                         f"(n_kv_heads must divide n_heads)。")
    return n_kv_heads
