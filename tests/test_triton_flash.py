"""The FlashAttention-2 Triton kernels (chapter 18), run without a GPU under Triton's interpreter.

``triton_flash_attention``'s forward must give what ``attnlib.flash_attention``
gives (output and lse), and its backward kernels the gradients that
``flash_attention_backward`` and autograd through the formula give: causal
bottom-right, rows that see no key, lengths and widths that are not multiples
of the blocks (16 here; CPU tensors run under the interpreter, see the
module's docstring), batch dimensions that broadcast.  On a CUDA machine the
``cuda`` cases run the same checks compiled.

Tolerances: float64 to 1e-10, as the other backward tests (the same sums in
another order).  float32 against the float64 reference to 1e-5 absolute and
1e-4 relative: float32 keeps 7 digits, and these values (of order 1, each a
sum of at most 64 products and exps) differ from float64 by about 1e-6; a
wrong kernel (−D forgotten, 1/√d dropped, weights from the wrong lse) is off
by more than 0.1.

Importing ``attnlib.torch.triton_flash`` sets ``TRITON_INTERPRET=1`` on a
machine without CUDA before triton is imported; pytest imports this module
while collecting, before any test runs, and no other test file imports triton,
so each xdist worker interprets.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

if importlib.util.find_spec("triton") is None:  # find_spec, not importorskip: triton must not be imported yet
    pytest.skip("没有安装 Triton (pip install triton==3.9.0，见 requirements.txt)", allow_module_level=True)

from test_flash_backward import naive, problem, reference  # noqa: E402  (the formula under autograd, float64)

from attnlib import numpy as anp  # noqa: E402  (after the skip: nothing to test without triton)
from attnlib.numpy.flash import flash_attention_backward  # noqa: E402
from attnlib.torch import triton_flash  # noqa: E402
from attnlib.torch.triton_flash import triton_flash_attention  # noqa: E402
from conftest import ROOT, to_numpy, to_torch  # noqa: E402

TOL = {np.float64: {"rtol": 1e-10, "atol": 1e-10}, np.float32: {"rtol": 1e-4, "atol": 1e-5}}

CASES = {  # q, k, v shapes; blocks of 16 rows and keys
    "one query, one key": ((1, 1, 16), (1, 1, 16), (1, 1, 16)),
    "n = 7, one partial block": ((2, 7, 16), (2, 7, 16), (2, 7, 16)),
    "n = 33, three blocks, d_v != d_k": ((2, 33, 32), (2, 33, 32), (2, 33, 16)),
    "n = 64, four whole blocks": ((1, 64, 16), (1, 64, 16), (1, 64, 32)),
    "n_q < n_k (decoding)": ((1, 7, 16), (1, 33, 16), (1, 33, 16)),
    "n_q > n_k (rows that see no key)": ((1, 33, 32), (1, 7, 32), (1, 7, 32)),
    "widths 20 and 12": ((2, 18, 20), (2, 40, 20), (2, 40, 12)),
}


def on(device: str, *arrays, grad=False):
    """numpy arrays as tensors on ``device`` (leaves that need gradients with ``grad``), after checking the mode."""
    if device == "cpu" and not triton_flash.INTERPRETED:
        if torch.cuda.is_available():
            pytest.skip("这里的 Triton 编译运行（有 CUDA）；CPU 张量需要在导入 triton 之前设置 TRITON_INTERPRET=1")
        pytest.fail("没有 CUDA，Triton 却没有使用解释器：有代码在 attnlib.torch.triton_flash 之前导入了 triton")
    return [to_torch(a, device).requires_grad_(grad) for a in arrays]


def run(device, q, k, v, d_out, causal, d_lse=None):
    """out, lse and (dq, dk, dv) from the kernels, as numpy arrays."""
    leaves = on(device, q, k, v, grad=True)
    out, lse = triton_flash_attention(*leaves, causal=causal, return_lse=True)
    loss = (out * to_torch(d_out, device)).sum()
    if d_lse is not None:
        loss = loss + (lse * to_torch(d_lse, device)).sum()
    loss.backward()
    return to_numpy(out), to_numpy(lse), tuple(to_numpy(t.grad) for t in leaves)


@pytest.mark.parametrize(("causal", "dtype"), [(False, np.float64), (True, np.float64), (True, np.float32)])
@pytest.mark.parametrize("case", list(CASES))  # float32 with causal only: the interpreter is slow
def test_forward_and_gradients_equal_the_formula_and_the_tiled_backward(device, case, causal, dtype):
    q, k, v, d_out, _ = problem(CASES[case], seed=len(case))
    out_want, lse_want, grads_want = reference(q, k, v, d_out, causal=causal)  # float64, autograd
    out, lse, grads = run(device, *(a.astype(dtype) for a in (q, k, v, d_out)), causal)
    assert out.dtype == dtype and out.shape == out_want.shape
    np.testing.assert_allclose(out, out_want, **TOL[dtype])
    np.testing.assert_allclose(lse, lse_want, **TOL[dtype])  # -inf exactly where a row sees no key
    for name, got, want in zip("qkv", grads, grads_want, strict=True):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, **TOL[dtype], err_msg=f"d{name}")
    if dtype == np.float64:  # and the NumPy library's tiled functions, block for block another code
        out_np, lse_np = anp.flash_attention(q, k, v, causal=causal, return_lse=True)
        np.testing.assert_allclose(out, out_np, **TOL[dtype])
        np.testing.assert_allclose(lse, lse_np, **TOL[dtype])
        for got, want in zip(grads, flash_attention_backward(q, k, v, out_np, lse_np, d_out, causal=causal),
                             strict=True):
            np.testing.assert_allclose(got, want, **TOL[dtype])


def test_rows_that_see_no_key_give_zeros_never_nan(device):
    """Causal with 33 queries and 7 keys: rows 0-25 see nothing; their outputs and query gradients are 0."""
    q, k, v, d_out, _ = problem(CASES["n_q > n_k (rows that see no key)"], seed=5)
    out, lse, (dq, dk, dv) = run(device, q, k, v, d_out, causal=True)
    assert all(np.isfinite(a).all() for a in (out, dq, dk, dv))
    assert np.isneginf(lse[:, :26]).all() and np.isfinite(lse[:, 26:]).all()
    np.testing.assert_array_equal(out[:, :26], 0.0)
    np.testing.assert_array_equal(dq[:, :26], 0.0)


def test_a_gradient_arriving_at_lse_too(device):
    """lse is an output with a gradient of its own: it changes each row's D to D - d_lse."""
    q, k, v, d_out, _ = problem(CASES["n = 33, three blocks, d_v != d_k"], seed=6)
    d_lse = np.random.default_rng(6).normal(size=d_out.shape[:-1])
    leaves = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out, lse = naive(*leaves, causal=True)
    ((out * torch.tensor(d_out)).sum() + (lse * torch.tensor(d_lse)).sum()).backward()
    _, _, grads = run(device, q, k, v, d_out, causal=True, d_lse=d_lse)
    for got, leaf in zip(grads, leaves, strict=True):
        np.testing.assert_allclose(got, to_numpy(leaf.grad), **TOL[np.float64])


def test_batch_dimensions_broadcast_and_their_gradients_sum(device):
    q, k, v, d_out, _ = problem(((2, 1, 9, 16), (3, 12, 16), (12, 16)), seed=7)
    out, _, grads = run(device, q, k, v, d_out, causal=True)
    out_want, _, grads_want = reference(q, k, v, d_out, causal=True)
    assert out.shape == (2, 3, 9, 16) and [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    np.testing.assert_allclose(out, out_want, **TOL[np.float64])
    for got, want in zip(grads, grads_want, strict=True):
        np.testing.assert_allclose(got, want, **TOL[np.float64])
    leaves, expected = on(device, q, k, v, grad=True), [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    triton_flash_attention(*leaves, causal=True, return_lse=True)[1].sum().backward()  # lse alone: no d_out
    naive(*expected, causal=True)[1].sum().backward()
    for got, want in zip(leaves[:2], expected[:2], strict=True):
        np.testing.assert_allclose(to_numpy(got.grad), to_numpy(want.grad), **TOL[np.float64])
    assert not leaves[2].grad.any()  # lse does not depend on v


def test_float16_runs_with_float32_accumulators(device):
    """Half-precision inputs: output in float16, lse in float32, within float16's rounding of the truth."""
    q, k, v, d_out, _ = problem(CASES["n = 33, three blocks, d_v != d_k"], seed=8)
    out, lse, grads = run(device, *(a.astype(np.float16) for a in (q, k, v, d_out)), causal=True)
    out_want, lse_want, grads_want = reference(*(a.astype(np.float16).astype(np.float64) for a in (q, k, v, d_out)),
                                               causal=True)
    assert out.dtype == np.float16 and lse.dtype == np.float32
    np.testing.assert_allclose(out, out_want, atol=5e-3)  # float16: 3 digits
    np.testing.assert_allclose(lse, lse_want, atol=5e-3)
    for got, want in zip(grads, grads_want, strict=True):
        np.testing.assert_allclose(got, want, atol=3e-2)


def test_empty_inputs(device):
    q, k, v = on(device, np.ones((3, 16)), np.ones((0, 16)), np.ones((0, 8)))
    out, lse = triton_flash_attention(q, k, v, return_lse=True)
    assert out.shape == (3, 8) and not out.any() and torch.isneginf(lse).all()  # no key: zeros and -inf
    assert triton_flash_attention(q[:0], q, q).shape == (0, 16)


def test_bad_inputs_are_refused_in_chinese():
    q = torch.randn(5, 16)
    with pytest.raises(ValueError, match="d_k"):
        triton_flash_attention(q, torch.randn(5, 8), torch.randn(5, 8))
    with pytest.raises(ValueError, match="序列长度"):
        triton_flash_attention(q, q, torch.randn(4, 16))
    with pytest.raises(TypeError, match="浮点"):
        triton_flash_attention(q.int(), q, q)
    if triton_flash.INTERPRETED:
        with pytest.raises(TypeError, match="bfloat16"):
            triton_flash_attention(*(q.bfloat16(),) * 3)


def python(code: str, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter without TRITON_INTERPRET (this process has it set)."""
    environ = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=environ,
                          timeout=120)


@pytest.mark.skipif(torch.cuda.is_available(), reason="有 CUDA：此时模块不替你打开解释器")
def test_without_cuda_the_module_turns_the_interpreter_on_before_importing_triton():
    result = python("import sys, os, attnlib.torch\n"
                    "assert 'triton' not in sys.modules  # attnlib.torch never needs triton\n"
                    "from attnlib.torch.triton_flash import INTERPRETED, triton_flash_attention\n"
                    "import torch\n"
                    "out = triton_flash_attention(*[torch.ones(2, 16)] * 3)\n"
                    "print(INTERPRETED, os.environ['TRITON_INTERPRET'], out.sum().item())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "1", "32.0"]


def test_a_cpu_tensor_without_the_interpreter_is_refused_with_the_fix():
    """triton imported first, without TRITON_INTERPRET: the module leaves it alone and names the switch."""
    result = python("import triton, torch\n"
                    "from attnlib.torch.triton_flash import INTERPRETED, triton_flash_attention\n"
                    "assert not INTERPRETED\n"
                    "triton_flash_attention(*[torch.ones(2, 16)] * 3)")
    assert result.returncode != 0
    assert "RuntimeError" in result.stderr and "TRITON_INTERPRET=1" in result.stderr, result.stderr


def test_without_triton_the_import_error_names_the_install_command():
    result = python("import sys\nsys.modules['triton'] = None  # as if it were not installed\n"
                    "import attnlib.torch.triton_flash")
    assert "ImportError" in result.stderr and "pip install triton==3.9.0" in result.stderr, result.stderr


COMPILE = """
import os
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from attnlib.torch import triton_flash as tf

rows = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "OUT": "*fp16", "DO": "*fp16", "DK": "*fp16", "DV": "*fp16",
        "DQ": "*fp16", "LSE": "*fp32", "DELTA": "*fp32", "scale": "fp32", "n_q": "i32", "n_k": "i32", "d_k": "i32",
        "d_v": "i32"}
meta = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_DK=64, BLOCK_DV=64, PRECISION="tf32", CAUSAL=True)
for kernel, constants in ((tf._flash_forward, dict(meta, ACC=triton.language.float32)),
                          (tf._flash_backward_preprocess, dict(BLOCK_M=64, BLOCK_DV=64)),
                          (tf._flash_backward_dkdv, meta), (tf._flash_backward_dq, meta)):
    signature = {name: "constexpr" if name in constants else rows[name] for name in kernel.arg_names}
    compiled = triton.compile(ASTSource(kernel, signature, constants), target=GPUTarget("cuda", 90, 32),
                              options=tf.OPTIONS)
    print(kernel.__name__, len(compiled.asm["cubin"]) > 0)
"""


def test_the_kernels_compile_for_a_gpu_without_one():
    """The CUDA path cannot run here, but Triton compiles it all the same (its wheel ships ptxas): the four
    kernels, float16, causal, for sm_90 (H100), through PTX to machine code, so a GPU-only mistake shows here."""
    result = python(COMPILE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["_flash_forward", "True", "_flash_backward_preprocess", "True",
                                     "_flash_backward_dkdv", "True", "_flash_backward_dq", "True"], result.stdout
