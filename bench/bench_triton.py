"""Chapter 18's Triton FlashAttention-2 kernels, compiled on CUDA, against ``F.scaled_dot_product_attention``.

On a CUDA machine: the forward, and the forward plus backward, of
``triton_flash_attention`` and of torch's SDPA (FlashAttention-2 or cuDNN
kernels there) at a few sizes (4 sequences x 16 heads, d = 64, float16,
n = 1024 to 4096, causal and not), each the median of
``triton.testing.do_bench`` (CUDA events, the L2 cache flushed between calls),
printed as ratios ours / SDPA.  The outputs and gradients are compared first.
No target: the kernels are written to be read (fixed 64 x 64 blocks, no
autotuning, no pipelining hints) and the ratio shows what that costs.

Without CUDA it says so in one line and stops: under the interpreter the
kernels run as numpy, and those times say nothing about the compiled ones.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

BATCH, HEADS, D = 4, 16, 64
SIZES = (1024, 2048, 4096)


def case(n: int, causal: bool, attention, do_bench) -> dict:
    """Median milliseconds of forward and forward + backward, ours and SDPA's, at length ``n``."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, d_out = (torch.randn(BATCH, HEADS, n, D, device="cuda", dtype=torch.float16, generator=g)
                      for _ in range(4))
    leaves = [t.requires_grad_() for t in (q, k, v)]
    ours = lambda: attention(*leaves, causal=causal)  # noqa: E731
    sdpa = lambda: F.scaled_dot_product_attention(*leaves, is_causal=causal)  # noqa: E731
    out, want = ours(), sdpa()
    torch.testing.assert_close(out, want, atol=1e-2, rtol=1e-2)  # float16: 3 digits
    for a, b in zip(torch.autograd.grad(out, leaves, d_out), torch.autograd.grad(want, leaves, d_out), strict=True):
        torch.testing.assert_close(a, b, atol=3e-2, rtol=3e-2)

    def training_step(fn):
        return lambda: torch.autograd.grad(fn(), leaves, d_out)

    with torch.no_grad():
        forward = {"ours": do_bench(ours), "sdpa": do_bench(sdpa)}
    both = {"ours": do_bench(training_step(ours)), "sdpa": do_bench(training_step(sdpa))}
    return {"forward": forward, "both": both}


def main() -> None:
    if not torch.cuda.is_available():
        print("no CUDA device: the Triton kernels were not timed (interpreter times say nothing about them)")
        return
    from triton.testing import do_bench

    from attnlib.torch.triton_flash import triton_flash_attention

    print(f"triton_flash_attention against F.scaled_dot_product_attention on {torch.cuda.get_device_name()}, "
          f"{BATCH} x {HEADS} heads, d={D}, float16 (median ms; ratio ours / SDPA):")
    for causal in (False, True):
        for n in SIZES:
            r = case(n, causal, triton_flash_attention, do_bench)
            f, b = r["forward"], r["both"]
            print(f"  n={n:5d} causal={causal!s:5}  forward {f['ours']:7.3f} vs {f['sdpa']:7.3f} ms "
                  f"= {f['ours'] / f['sdpa']:5.2f}x   forward+backward {b['ours']:7.3f} vs {b['sdpa']:7.3f} ms "
                  f"= {b['ours'] / b['sdpa']:5.2f}x")


if __name__ == "__main__":
    main()
