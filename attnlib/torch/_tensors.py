"""Conversion and validation of torch inputs (the shared rules live in ``attnlib._checks``)."""

from __future__ import annotations

import math

import torch

from .. import _checks


def kind(t: torch.Tensor) -> str:
    """The numpy-style dtype kind of a tensor: 'f', 'c', 'b' or 'i'."""
    if t.is_floating_point():
        return "f"
    if t.is_complex():
        return "c"
    return "b" if t.dtype == torch.bool else "i"


def as_float(x, name: str) -> torch.Tensor:
    """Return ``x`` as a floating-point tensor (device and dtype kept), refusing int, bool, complex."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    _checks.check_float_kind(name, kind(t), t.dtype)
    return t


def as_float_tensors(**named) -> list[torch.Tensor]:
    """Convert several inputs that must share one float dtype and one device and be finite."""
    tensors = {name: as_float(x, name) for name, x in named.items()}
    _checks.check_same_dtype({n: t.dtype for n, t in tensors.items()})
    devices = {n: t.device for n, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{n}.device={d}" for n, d in devices.items())
        raise ValueError(f"输入不在同一设备上 (device mismatch): {listing}。")
    for name, t in tensors.items():
        if not all_finite(t):
            raise ValueError(f"{name} 含有 NaN 或 inf (non-finite values in {name})；"
                             f"若想让某些位置被掩码，请使用布尔 mask。")
    return list(tensors.values())


def all_finite(t: torch.Tensor) -> bool:
    """True if no entry is NaN or inf.

    One cheap reduction first: a sum is finite only if every entry is (it may
    also overflow, so a non-finite sum is confirmed entry by entry).
    """
    return math.isfinite(float(t.detach().sum())) or bool(torch.isfinite(t).all())


def as_mask(mask, target: tuple, device: torch.device, what: str = "注意力分数") -> torch.Tensor:
    """Return ``mask`` as a boolean tensor on ``device`` that broadcasts to ``target``."""
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(mask)
    _checks.check_mask(tuple(m.shape), kind(m), m.dtype, target, what)
    return m.to(device)
