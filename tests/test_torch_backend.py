"""What only the torch backend promises: devices, dtypes, autograd, the fused path."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlib import torch as att
from attnlib.torch import attention as torch_attention


def rand(*shape, device="cpu", dtype=torch.float64, grad=False):
    return torch.randn(*shape, device=device, dtype=dtype, requires_grad=grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_device_and_dtype_come_from_the_inputs(device, dtype):
    q, k, v = rand(2, 3, 4, device=device, dtype=dtype), rand(2, 5, 4, device=device, dtype=dtype), \
        rand(2, 5, 6, device=device, dtype=dtype)
    for need_weights in (True, False):
        out, w = att.scaled_dot_product_attention(q, k, v, mask=att.causal_mask(3, 5), need_weights=need_weights)
        assert out.device.type == device and out.dtype == dtype
        assert w is None or (w.device.type == device and w.dtype == dtype)
    x = rand(2, 5, 8, device=device, dtype=dtype)
    ws = [rand(8, 8, device=device, dtype=dtype) for _ in range(4)]
    out, w = att.multi_head_attention(x, x, *ws, 2, mask=att.padding_mask([3, 5], 5))
    assert out.device.type == device and w.dtype == dtype


def test_inputs_on_different_devices_are_refused():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match="device"):
        att.scaled_dot_product_attention(q, q.to("meta"), q)


def test_need_weights_false_uses_the_fused_kernel(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch_attention.F, "scaled_dot_product_attention", spy)
    q, k, v = rand(2, 4, 8), rand(2, 4, 8), rand(2, 4, 8)
    att.scaled_dot_product_attention(q, k, v, causal=True, need_weights=False)
    assert calls[-1]["is_causal"] is True and calls[-1]["attn_mask"] is None
    att.scaled_dot_product_attention(q, rand(2, 6, 8), rand(2, 6, 8), causal=True, need_weights=False)
    assert calls[-1]["is_causal"] is False and calls[-1]["attn_mask"].shape == (1, 1, 4, 6)
    att.scaled_dot_product_attention(q, k, v)
    assert len(calls) == 2, "the weights path must not call the fused kernel"


@pytest.mark.parametrize("batch", [(), (3,), (2, 3), (2, 1, 3)])
def test_need_weights_false_runs_a_fused_kernel_for_any_batch_shape(device, batch):
    """Only fused backends allowed: torch raises if the call would fall back to the unfused math path.

    (It does for 2-d and 3-d inputs, so attnlib must hand it 4-d ones.  It also does, on the CPU,
    when d_v != d_k: the CPU flash kernel wants one head size, so v has d_k columns here.)
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]
    f32 = {"device": device, "dtype": torch.float32}  # the CUDA kernels take no float64
    q, k, v = rand(*batch, 5, 8, **f32), rand(*batch[1:], 7, 8, **f32), rand(7, 8, **f32)
    mask = torch.rand(*batch[-1:], 1, 7, device=device) < 0.7
    for kwargs in ({}, {"causal": True}, {"mask": mask}, {"mask": mask, "causal": True}):
        expected, _ = att.scaled_dot_product_attention(q, k, v, **kwargs)
        with sdpa_kernel(fused):
            out, _ = att.scaled_dot_product_attention(q, k, v, need_weights=False, **kwargs)
        assert out.shape == (*batch, 5, 8)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_fully_masked_rows_never_reach_the_fused_kernel(monkeypatch, device):
    """Some fused kernels turn an all -inf row into NaN; a kernel that does so must not leak NaN to the user.

    The stand-in kernel below is torch's own, except that rows whose mask is all False come out NaN.
    """
    real = F.scaled_dot_product_attention

    def nan_for_empty_rows(q, k, v, attn_mask=None, is_causal=False):
        out = real(q, k, v, attn_mask=attn_mask, is_causal=is_causal)
        if attn_mask is None:
            return out
        return out.masked_fill(~attn_mask.any(-1, keepdim=True), float("nan"))

    monkeypatch.setattr(torch_attention.F, "scaled_dot_product_attention", nan_for_empty_rows)
    q, k, v = rand(2, 4, 3, device=device, grad=True), rand(2, 5, 3, device=device, grad=True), \
        rand(2, 5, 2, device=device, grad=True)
    mask = torch.rand(2, 4, 5, device=device) < 0.7
    mask[0, 1] = False
    mask[1, 3] = False
    out, _ = att.scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    expected, _ = att.scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)
    assert (out[0, 1] == 0).all() and (out[1, 3] == 0).all()
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert (q.grad[0, 1] == 0).all() and (q.grad[1, 3] == 0).all()


@pytest.mark.parametrize("need_weights", [True, False])
def test_gradients_are_correct(device, need_weights):
    """torch.autograd.gradcheck (finite differences, float64) through both paths, with a fully masked row."""
    q, k, v = rand(2, 3, 4, device=device, grad=True), rand(2, 5, 4, device=device, grad=True), \
        rand(2, 5, 2, device=device, grad=True)
    mask = torch.rand(2, 3, 5, device=device) < 0.7
    mask[0, 1] = False

    def f(q, k, v):
        return att.scaled_dot_product_attention(q, k, v, mask=mask, causal=True, need_weights=need_weights)[0]

    assert torch.autograd.gradcheck(f, (q, k, v))
    f(q, k, v).sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert (q.grad[0, 1] == 0).all(), "a fully masked query gets no gradient"


def test_softmax_and_multihead_gradients(device):
    x = rand(2, 4, 6, device=device, grad=True)
    mask = torch.tensor([True, True, False, True, False, True], device=device)
    assert torch.autograd.gradcheck(lambda x: att.softmax(x, temperature=0.7, mask=mask), (x,))
    ws = [rand(6, 6, device=device, grad=True) for _ in range(4)]
    assert torch.autograd.gradcheck(lambda x, *ws: att.multi_head_attention(x, x, *ws, 3, causal=True)[0], (x, *ws))


def test_cpu_and_cuda_agree():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    q, k, v = rand(2, 7, 16), rand(2, 9, 16), rand(2, 9, 8)
    mask = torch.rand(2, 7, 9) < 0.6
    for need_weights in (True, False):
        cpu, _ = att.scaled_dot_product_attention(q, k, v, mask=mask, causal=True, need_weights=need_weights)
        gpu, _ = att.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), mask=mask, causal=True,
                                                  need_weights=need_weights)
        np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=1e-10, atol=1e-12)


test_cpu_and_cuda_agree = pytest.mark.cuda(test_cpu_and_cuda_agree)


def test_weights_without_autograd_equal_weights_with_it():
    """Without autograd the weights overwrite the scores in place; the numbers must not change."""
    q, k, v = rand(2, 5, 4, grad=True), rand(2, 6, 4), rand(2, 6, 3)
    mask = torch.rand(2, 5, 6) < 0.6
    mask[1, 2] = False
    out, w = att.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    with torch.no_grad():
        out2, w2 = att.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    torch.testing.assert_close(out2, out.detach(), rtol=0, atol=0)
    torch.testing.assert_close(w2, w.detach(), rtol=0, atol=0)
    assert (w2[1, 2] == 0).all() and w.requires_grad and not w2.requires_grad


def test_finite_check_is_exact():
    from attnlib.torch._tensors import all_finite

    big = torch.full((8,), 3e38, dtype=torch.float32)  # finite, but its sum overflows
    assert all_finite(big)
    assert not all_finite(torch.tensor([1.0, float("nan")]))
    assert not all_finite(torch.tensor([float("inf"), -float("inf")]))
    assert all_finite(torch.zeros(0))
