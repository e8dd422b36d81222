"""Chapter 18's tiled backward pass against backward passes that keep the n x n weights, as ratios in one run.

Targets (issue 26):

* NumPy ``flash_attention_backward`` at n = 4096, d = 64, float32: time at most
  2.5x the untiled backward from the stored weights (``backward_from_weights``,
  the same formulas on the whole n x n matrix, what autograd does), peak
  memory at most 1/10 of it.  The memory of each is what it keeps from the
  forward for the backward (lse, n numbers; the weights, n x n) plus the peak
  of the backward call itself; q, k, v, out and dO are common to both and not
  counted.
* torch, CPU, n = 2048 (4 heads, d = 64, float32): the backward of
  ``att.flash_attention`` (its ``autograd.Function``, recomputing the weights
  block by block) at most 1.5x the backward of autograd through
  ``F.scaled_dot_product_attention`` with the math backend (which stores the
  weights).  Only the backward is timed: both forwards ran before.

Times are the minimum over a few rounds, the two variants interleaved (see bench_attention).  The NumPy
ratio is also printed with one BLAS thread: the tiled backward makes many small products where the
untiled one makes four large ones, and small products gain less from a second thread (or lose more when
other programs share the cores).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from bench_attention import min_times
from bench_efficiency import peak_bytes
from threadpoolctl import threadpool_limits
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import flash

D = 64
TARGET_TIME, TARGET_MEMORY, TARGET_TORCH = 2.5, 0.10, 1.5


def numpy_case(n: int = 4096) -> dict:
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((n, D), dtype=np.float32) for _ in range(4))
    out, lse = anp.flash_attention(q, k, v, return_lse=True)
    weights = anp.scaled_dot_product_attention(q, k, v)[1]  # (n, n): what a backward from stored weights keeps
    tiled = lambda: flash.flash_attention_backward(q, k, v, out, lse, d_out)  # noqa: E731
    stored = lambda: flash.backward_from_weights(q, k, v, weights, out, d_out)  # noqa: E731
    for a, b in zip(tiled(), stored(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)  # the same gradients, up to float32 rounding
    t = min_times({"tiled": tiled, "stored": stored}, rounds=21)  # ~0.1 s a call: rounds are cheap
    with threadpool_limits(1):  # many small products against four large ones: how much is BLAS threading?
        one = min_times({"tiled": tiled, "stored": stored}, rounds=5)
    calls = {"tiled": peak_bytes(tiled), "stored": peak_bytes(stored)}
    kept = {"tiled": lse.nbytes, "stored": weights.nbytes}
    return {"time": t["tiled"] / t["stored"], "s": t, "one thread": one["tiled"] / one["stored"],
            "calls": calls, "kept": kept,
            "memory": (calls["tiled"] + kept["tiled"]) / (calls["stored"] + kept["stored"])}


def torch_case(n: int = 2048, heads: int = 4) -> dict:
    g = torch.Generator().manual_seed(0)
    q, k, v, d_out = (torch.randn(1, heads, n, D, generator=g) for _ in range(4))
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ours = att.flash_attention(*leaves)
    with sdpa_kernel(SDPBackend.MATH):
        math_out = F.scaled_dot_product_attention(*leaves)
    torch.testing.assert_close(ours, math_out, rtol=1e-4, atol=1e-5)

    def backward(out):
        return lambda: torch.autograd.grad(out, leaves, d_out, retain_graph=True)

    for a, b in zip(backward(ours)(), backward(math_out)(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)
    t = min_times({"function": backward(ours), "math": backward(math_out)}, rounds=21)
    return {"time": t["function"] / t["math"], "s": t, "threads": torch.get_num_threads()}


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> None:
    r = numpy_case()
    mib = 2**20
    print(f"NumPy flash_attention_backward, n=4096, d={D}, float32 (against backward_from_weights):")
    print(f"  time   {r['time']:5.2f}x (target <= {TARGET_TIME}x) {verdict(r['time'] <= TARGET_TIME)}"
          f"  [{r['s']['tiled']:.2f} s vs {r['s']['stored']:.2f} s; with one BLAS thread {r['one thread']:.2f}x]")
    print(f"  memory {r['memory']:5.3f}x (target <= {TARGET_MEMORY}x) {verdict(r['memory'] <= TARGET_MEMORY)}"
          f"  [kept {r['kept']['tiled'] / mib:.2f} + call {r['calls']['tiled'] / mib:.1f} MiB"
          f" vs kept {r['kept']['stored'] / mib:.1f} + call {r['calls']['stored'] / mib:.1f} MiB;"
          f" the calls alone {r['calls']['tiled'] / r['calls']['stored']:.3f}x]")
    t = torch_case()
    print(f"\ntorch flash_attention backward (autograd.Function), CPU ({t['threads']} threads), 1 x 4 heads, "
          f"n=2048, d={D}, float32:")
    print(f"  time   {t['time']:5.2f}x autograd through F.scaled_dot_product_attention (math backend) "
          f"(target <= {TARGET_TORCH}x) {verdict(t['time'] <= TARGET_TORCH)}"
          f"  [{t['s']['function'] * 1e3:.0f} ms vs {t['s']['math'] * 1e3:.0f} ms]")
    assert r["time"] <= TARGET_TIME and r["memory"] <= TARGET_MEMORY and t["time"] <= TARGET_TORCH, \
        "a backward-pass target was missed (see above)"


if __name__ == "__main__":
    main()
