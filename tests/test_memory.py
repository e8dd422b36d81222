"""Peak memory of one NumPy attention call: at most one n x n buffer, no hidden copies of the scores.

tracemalloc sees every NumPy allocation, so the peak is exact and repeatable
(no timing involved).
"""

import tracemalloc

import numpy as np
import pytest

from attnlib import numpy as anp
from attnlib.numpy import attention


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    del result
    return peak


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_peak_memory_is_one_score_buffer(dtype, causal):
    n, d = 2048, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, d)).astype(dtype) for _ in range(3))
    item = np.dtype(dtype).itemsize
    scores, io = n * n * item, n * d * item
    tile = attention.TILE_ELEMENTS * item
    with_weights = peak_bytes(lambda: anp.scaled_dot_product_attention(q, k, v, causal=causal))
    # The weights (the one n x n buffer), the output, the scaled copy of q, and tile-sized temporaries.
    assert with_weights <= scores + 2 * io + 2 * tile, (with_weights, scores)
    without = peak_bytes(lambda: anp.scaled_dot_product_attention(q, k, v, causal=causal, need_weights=False))
    assert without <= 2 * io + 3 * tile, (without, scores)
    assert without < scores / 2, "need_weights=False must never hold the full score matrix"
