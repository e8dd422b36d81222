"""Conversion and validation of NumPy inputs (the shared rules live in ``attnlib._checks``)."""

from __future__ import annotations

import numpy as np

from .. import _checks


def as_float(x, name: str) -> np.ndarray:
    """Return ``x`` as a floating-point ndarray, refusing int, bool and complex data."""
    arr = np.asarray(x)
    _checks.check_float_kind(name, arr.dtype.kind, arr.dtype)
    return arr


def as_float_arrays(**named) -> list[np.ndarray]:
    """Convert several inputs that must share one float dtype and be finite."""
    arrays = {name: as_float(x, name) for name, x in named.items()}
    _checks.check_same_dtype({n: a.dtype for n, a in arrays.items()})
    for name, arr in arrays.items():
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} 含有 NaN 或 inf (non-finite values in {name})；"
                             f"若想让某些位置被掩码，请使用布尔 mask。")
    return list(arrays.values())


def as_mask(mask, target: tuple, what: str = "注意力分数") -> np.ndarray:
    """Return ``mask`` as a boolean ndarray that broadcasts to ``target``."""
    arr = np.asarray(mask)
    _checks.check_mask(arr.shape, arr.dtype.kind, arr.dtype, target, what)
    return arr
