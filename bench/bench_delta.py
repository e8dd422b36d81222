"""Chapter 19's delta rule: the chunked form against the step-by-step recurrence, in one run.

Target (n = 4,096 steps, d_k = d_v = 64, h = 4 heads, float32, a gate alpha and beta of every
step, L2-normalised keys as the layers feed them; one CPU thread for torch and for NumPy's BLAS,
as the other benches):

* ``chunked_delta_rule`` (chunks of 64, the default) takes at most 0.5x the time of
  ``delta_rule``, the recurrence one step at a time, in both backends, with the same outputs
  and final state (to float32 rounding: the two orders of the sums differ).

Also printed and asserted: NumPy's chunked form inverts each chunk's unit lower-triangular
matrix ``I + A`` by doubling (``attnlib.numpy.delta.unit_lower_inverse``) and multiplies, which
takes at most 1.0x the time of ``np.linalg.solve`` on the same systems and right-hand sides (a
general LU with pivoting, per chunk): the reason the module does not call it.

Times are the minimum over rounds, the two functions interleaved (see bench_attention).
"""

from __future__ import annotations

import numpy as np
import torch
from bench_attention import min_times
from threadpoolctl import threadpool_limits

from attnlib.numpy import delta as ndelta
from attnlib.torch import delta as tdelta

N, D, H = 4096, 64, 4
CHUNK = 64
TARGET = 0.5


def inputs(rng) -> list[np.ndarray]:
    """q, k, v ``(H, N, D)``, beta and alpha ``(H, N)``, float32; unit keys."""
    q, k, v = (rng.normal(size=(H, N, D)) for _ in range(3))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    beta, alpha = rng.uniform(0.0, 1.0, size=(H, N)), rng.uniform(0.9, 1.0, size=(H, N))
    return [a.astype(np.float32) for a in (q, k, v, beta, alpha)]


def one_thread(fns: dict, rounds: int) -> dict:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):  # NumPy's BLAS on one thread too
            return min_times(fns, rounds=rounds)
    finally:
        torch.set_num_threads(threads)


def chunked_case(mod, conv, rounds: int = 3) -> dict:
    """Seconds per call of the recurrence and of the chunked form, and whether they agree."""
    q, k, v, beta, alpha = (conv(a) for a in inputs(np.random.default_rng(0)))
    fns = {"recurrence": lambda: mod.delta_rule(q, k, v, beta, alpha=alpha),
           "chunked": lambda: mod.chunked_delta_rule(q, k, v, beta, alpha=alpha, chunk_size=CHUNK)}
    (o1, s1), (o2, s2) = fns["recurrence"](), fns["chunked"]()
    same = all(np.allclose(_np(a), _np(b), rtol=1e-3, atol=1e-3) for a, b in ((o1, o2), (s1, s2)))
    t = one_thread(fns, rounds)
    return {"same": same, **t, "ratio": t["chunked"] / t["recurrence"]}


def inverse_case(rounds: int = 5) -> dict:
    """Seconds for the chunks' systems: the doubling inverse and two products against np.linalg.solve."""
    rng = np.random.default_rng(1)
    k = inputs(rng)[1].reshape(H, N // CHUNK, CHUNK, D)
    a = np.tril(0.5 * k @ np.swapaxes(k, -1, -2), -1)  # (H, m, C, C), as beta K K^T
    rhs_v, rhs_k = rng.normal(size=k.shape).astype(np.float32), k
    system, both = np.eye(CHUNK, dtype=np.float32) + a, np.concatenate([rhs_v, rhs_k], axis=-1)

    def doubling():
        t = ndelta.unit_lower_inverse(a)
        return t @ rhs_v, t @ rhs_k

    times = one_thread({"doubling": doubling, "solve": lambda: np.linalg.solve(system, both)}, rounds)
    same = np.allclose(np.concatenate(doubling(), axis=-1), np.linalg.solve(system, both), rtol=1e-3, atol=1e-3)
    return {"same": same, **times, "ratio": times["doubling"] / times["solve"]}


def _np(a):
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a


def main() -> None:
    print(f"delta rule at n = {N:,}, d_k = d_v = {D}, h = {H}, chunks of {CHUNK}, float32, one CPU thread:")
    missed = []
    for name, mod, conv in (("numpy", ndelta, lambda a: a), ("torch", tdelta, torch.from_numpy)):
        r = chunked_case(mod, conv)
        ok = r["ratio"] <= TARGET and r["same"]
        print(f"  {name:5s} chunked {r['chunked'] * 1e3:7.1f} ms, recurrence {r['recurrence'] * 1e3:7.1f} ms, "
              f"ratio {r['ratio']:5.3f} (target <= {TARGET}), same output: {r['same']}  {'ok' if ok else 'MISSED'}")
        if not ok:
            missed.append(f"{name} chunked / recurrence {r['ratio']:.3f}")
    r = inverse_case()
    ok = r["ratio"] <= 1.0 and r["same"]
    print(f"  numpy (I + A)^-1 by doubling and two products {r['doubling'] * 1e3:6.1f} ms, np.linalg.solve "
          f"{r['solve'] * 1e3:6.1f} ms, ratio {r['ratio']:5.3f} (target <= 1.0), same: {r['same']}  "
          f"{'ok' if ok else 'MISSED'}")
    if not ok:
        missed.append(f"doubling inverse / np.linalg.solve {r['ratio']:.3f}")
    assert not missed, "; ".join(missed)


if __name__ == "__main__":
    main()
