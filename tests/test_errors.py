"""Every documented bad input raises a clear ValueError/TypeError naming what is wrong."""

import numpy as np
import pytest

R = np.random.default_rng(0)
Q, K, V = R.normal(size=(2, 3, 4)), R.normal(size=(2, 5, 4)), R.normal(size=(2, 5, 6))
X, W = R.normal(size=(2, 5, 8)), R.normal(size=(8, 8))


def sdpa(q=Q, k=K, v=V, **kw):
    return ("scaled_dot_product_attention", (q, k, v), kw)


BAD = {
    "d_k mismatch": (sdpa(k=R.normal(size=(2, 5, 3))), ValueError, ["d_k", "(2, 3, 4)", "(2, 5, 3)"]),
    "key/value length": (sdpa(v=R.normal(size=(2, 4, 6))), ValueError, ["(2, 5, 4)", "(2, 4, 6)"]),
    "batch does not broadcast": (sdpa(k=R.normal(size=(3, 5, 4)), v=R.normal(size=(3, 5, 6))), ValueError,
                                 ["(2, 3, 4)", "(3, 5, 4)"]),
    "mask cannot broadcast": (sdpa(mask=np.ones((3, 3), bool)), ValueError, ["(3, 3)", "(2, 3, 5)"]),
    "mask enlarges the scores": (sdpa(mask=np.ones((4, 2, 3, 5), bool)), ValueError, ["(4, 2, 3, 5)"]),
    "float mask": (sdpa(mask=np.zeros((3, 5))), TypeError, ["mask", "float64"]),
    "integer q": (sdpa(q=np.ones((2, 3, 4), dtype=np.int64)), TypeError, ["q", "int64"]),
    "complex k": (sdpa(k=K.astype(np.complex128)), TypeError, ["k", "complex"]),
    "bool v": (sdpa(v=np.ones((2, 5, 6), bool)), TypeError, ["v", "bool"]),
    "mixed dtypes": (sdpa(q=Q.astype(np.float32)), TypeError, ["float32", "float64"]),
    "NaN input": (sdpa(q=np.full((2, 3, 4), np.nan)), ValueError, ["q", "NaN"]),
    "1-D q": (sdpa(q=np.ones(4)), ValueError, ["q", "(4,)"]),
    "heads do not divide": (("multi_head_attention", (X, X, W, W, W, W, 3), {}), ValueError,
                            ["d_model=8", "n_heads=3"]),
    "zero heads": (("multi_head_attention", (X, X, W, W, W, W, 0), {}), ValueError, ["n_heads"]),
    "projection shape": (("multi_head_attention", (X, X, R.normal(size=(7, 8)), W, W, W, 2), {}), ValueError,
                         ["w_q", "(7, 8)"]),
    "bias shape": (("multi_head_attention", (X, X, W, W, W, W, 2), {"b_q": np.zeros(3)}), ValueError, ["b_q", "(3,)"]),
    "mha mask": (("multi_head_attention", (X, X, W, W, W, W, 2), {"mask": np.ones((2, 4, 5), bool)}), ValueError,
                 ["(2, 4, 5)", "(2, 5, 5)"]),
    "qkv w_k width": (("qkv_projection", (X, W, R.normal(size=(8, 4)), W), {}), ValueError, ["w_k", "(8, 4)"]),
    "integer x in projection": (("qkv_projection", (np.ones((5, 8), int), W, W, W), {}), TypeError, ["x"]),
    "scores d_k": (("attention_scores", (Q, R.normal(size=(2, 5, 2))), {}), ValueError, ["d_k"]),
    "scores scale": (("attention_scores", (Q, K), {"scale": -1.0}), ValueError, ["scale"]),
    "temperature zero": (("softmax", (Q,), {"temperature": 0}), ValueError, ["temperature", "0"]),
    "temperature negative": (("softmax", (Q,), {"temperature": -2.0}), ValueError, ["temperature"]),
    "temperature text": (("softmax", (Q,), {"temperature": "hot"}), TypeError, ["temperature"]),
    "softmax integer": (("softmax", (np.arange(3),), {}), TypeError, ["x", "int"]),
    "softmax complex": (("softmax", (np.ones(3, complex),), {}), TypeError, ["complex"]),
    "softmax +inf": (("softmax", (np.array([1.0, np.inf]),), {}), ValueError, ["+inf"]),
    "softmax axis": (("softmax", (Q,), {"axis": 3}), ValueError, ["axis=3"]),
    "softmax mask": (("softmax", (Q,), {"mask": np.ones((2, 4), bool)}), ValueError, ["(2, 4)", "(2, 3, 4)"]),
    "padding length": (("padding_mask", ([2, 7], 5), {}), ValueError, ["[7]"]),
    "padding float lengths": (("padding_mask", ([2.0, 1.5], 5), {}), TypeError, ["lengths"]),
    "causal negative": (("causal_mask", (-1,), {}), ValueError, ["n_q"]),
    "window zero": (("sliding_window_mask", (4, 0), {}), ValueError, ["window"]),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_raises_a_clear_error(backend, case):
    (fname, args, kwargs), error, fragments = BAD[case]
    with pytest.raises(error) as info:
        backend.call(fname, *args, **kwargs)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} missing from: {message}"
