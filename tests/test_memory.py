"""Peak memory of one attention call: at most one n x n buffer, no hidden copies of the scores.

NumPy: tracemalloc sees every NumPy allocation, so the peak is exact and repeatable
(no timing involved).  torch: its CPU allocator is invisible to tracemalloc, so a
fresh process measures its peak resident size (Linux reports it in /proc).
"""

import json
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from attnlib import numpy as anp
from attnlib.numpy import flash


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
    """tracemalloc counts NumPy's allocations exactly, so these limits hold on any CPU.

    With weights the right answer is one n x n buffer (the weights themselves)
    plus arrays of size n x d; a second score-sized temporary (an unscaled copy,
    a mask, ``exp`` into a new array) would make it two.  The limit sits between.
    Without weights the right answer is a few blocks of scores; any n x n array is wrong.
    """
    n, d = 2048, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, d)).astype(dtype) for _ in range(3))
    scores = n * n * np.dtype(dtype).itemsize
    with_weights = peak_bytes(lambda: anp.scaled_dot_product_attention(q, k, v, causal=causal))
    assert scores <= with_weights <= 1.5 * scores, with_weights / scores
    without = peak_bytes(lambda: anp.scaled_dot_product_attention(q, k, v, causal=causal, need_weights=False))
    block = flash.TILE_ELEMENTS * np.dtype(dtype).itemsize
    assert without <= 2 * block + scores / 8, without / scores
    assert without < scores / 2, "need_weights=False must never hold the full score matrix"


TORCH_PEAKS = r"""
import json, sys, torch
from attnlib import torch as att

n = int(sys.argv[1])
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(n, 64, generator=g) for _ in range(3))
mask = torch.empty(n, n, dtype=torch.bool).bernoulli_(0.9, generator=g)


def high_water_mark():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM"))


peaks = {}
for need_weights in (True, False):
    for case, kwargs in {"plain": {}, "causal": {"causal": True}, "mask": {"mask": mask}}.items():
        small = {key: (value[:64, :64] if key == "mask" else value) for key, value in kwargs.items()}
        att.scaled_dot_product_attention(q[:64], k[:64], v[:64], need_weights=need_weights, **small)  # warm-up
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # reset the peak resident size to the current one
        before = high_water_mark()
        with torch.no_grad():
            result = att.scaled_dot_product_attention(q, k, v, need_weights=need_weights, **kwargs)
        peaks[f"{case} {need_weights}"] = (high_water_mark() - before) / (n * n * 4)
        del result
print(json.dumps(peaks))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads the peak resident size from /proc (Linux)")
def test_torch_peak_memory_is_at_most_one_score_buffer():
    """Peak resident memory of one torch CPU call, in n x n float32 buffers (n=2048: 16 MiB each).

    The inputs and output add 0.12, BLAS a little workspace.  The weights path keeps one buffer (scores, masked and
    normalised in place); causal adds its boolean mask (a quarter buffer).  The fused path
    keeps none, except that torch turns a boolean mask into a float one of the same shape.
    """
    # A fixed mmap threshold: glibc otherwise raises it after the first big free, keeps later
    # n x n blocks on its heap after they are freed, and the next case's peak would be hidden.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    run = subprocess.run([sys.executable, "-c", TORCH_PEAKS, "2048"], capture_output=True, text=True, check=True,
                         env=env)
    peaks = json.loads(run.stdout)
    # Each limit sits in the gap between right and wrong, not just above one CPU's figure (torch's kernels
    # differ by instruction set: an AVX2 machine measured 1.13, 1.03, 1.27, 0.09, 0.09, 1.10, an AVX-512 one
    # up to 1.22 and 0.16).  With weights: one buffer (+ a boolean causal mask, a quarter) is right, two wrong.
    # Without weights: the fused kernel holds no buffer, the math path it must avoid held 2.27 (3.27 causal);
    # a boolean mask becomes a float one of its size inside torch (right: ~1.1, the math path: 3.3).
    limits = {"plain True": 1.6, "mask True": 1.6, "causal True": 1.75,
              "plain False": 0.5, "causal False": 0.5, "mask False": 2.0}
    over = {case: round(peak, 3) for case, peak in peaks.items() if peak > limits[case]}
    assert not over, f"peak memory above the limit (n x n buffers): {over}; all: {peaks}"
    assert peaks["plain True"] > 0.9, "the measurement must see the weights themselves"
