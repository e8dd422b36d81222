"""Chapter 10's efficient attention against exact attention, as ratios measured in one run.

Targets (issue 11):

* ``flash_attention`` at n = 8192, d = 64, float32: peak memory at most 1/10 of
  exact attention's (``scaled_dot_product_attention`` returning the weights),
  time at most 2x exact attention's;
* sliding-window attention (window 256, 4 global tokens): time at n = 16384 at
  most 1/8 of exact attention's (the output-only path, exact attention's
  fastest), and the slope of log(time) against log(n) over n = 1k-16k at most 1.2.

Times are the minimum over a few rounds, each pair interleaved (see bench_attention).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
from bench_attention import min_times

from attnlib import numpy as anp

D = 64
WINDOW, GLOBAL = 256, (0, 1, 2, 3)


def inputs(n: int):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((n, D), dtype=np.float32) for _ in range(3)]


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def flash_case(n: int = 8192) -> dict:
    q, k, v = inputs(n)
    exact = lambda: anp.scaled_dot_product_attention(q, k, v)  # noqa: E731
    flash = lambda: anp.flash_attention(q, k, v)  # noqa: E731
    t = min_times({"exact": exact, "flash": flash}, rounds=3)
    return {"time": t["flash"] / t["exact"], "memory": peak_bytes(flash) / peak_bytes(exact),
            "exact s": t["exact"], "flash s": t["flash"]}


def window_case(sizes=(1024, 2048, 4096, 8192, 16384)) -> dict:
    def window(q, k, v):
        return lambda: anp.sliding_window_attention(q, k, v, WINDOW, global_tokens=GLOBAL)

    times = {n: min_times({"window": window(*inputs(n))}, rounds=7)["window"] for n in sizes}
    q, k, v = inputs(sizes[-1])
    last = min_times({"window": window(q, k, v),
                      "exact": lambda: anp.scaled_dot_product_attention(q, k, v, need_weights=False)},
                     rounds=7)  # ~1 s per exact round; 3 rounds left the ratio within noise of the target
    slope = np.polyfit(np.log(list(times)), np.log(list(times.values())), 1)[0]
    return {"times": times, "ratio": last["window"] / last["exact"], "slope": float(slope)}


def main() -> None:
    f = flash_case()
    print(f"flash_attention, n=8192, d={D}, float32 (exact = scaled_dot_product_attention with weights):")
    print(f"  time   {f['time']:5.2f}x exact  (target <= 2.0x) {'ok' if f['time'] <= 2.0 else 'MISSED'}"
          f"  [{f['flash s']:.2f} s vs {f['exact s']:.2f} s]")
    print(f"  memory {f['memory']:5.3f}x exact (target <= 0.10x) {'ok' if f['memory'] <= 0.10 else 'MISSED'}")
    w = window_case()
    print(f"\nsliding window {WINDOW} + {len(GLOBAL)} global tokens, d={D}, float32:")
    for n, t in w["times"].items():
        print(f"  n={n:6d}: {t * 1e3:8.1f} ms")
    verdict = "ok" if w["slope"] <= 1.2 else "MISSED"
    print(f"  fitted slope of log time on log n: {w['slope']:.2f} (target <= 1.2) {verdict}")
    print(f"  n=16384 against exact attention (output only): {w['ratio']:.3f}x (target <= 0.125x) "
          f"{'ok' if w['ratio'] <= 0.125 else 'MISSED'}")


if __name__ == "__main__":
    main()
