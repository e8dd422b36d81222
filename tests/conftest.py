"""Shared fixtures: the two backends, the torch devices, array converters, and the system programs.

Tests that need a system program this machine lacks are skipped with one reason
that names the program and the command installing it: ``browser`` tests need
Chromium, ``cjk_font`` tests a font with Chinese glyphs (``make test`` installs
both first when it runs as root, see ``scripts/provision.py``), ``hub`` tests
npm's ``configurable-http-proxy`` (installed into ``.venv/hub-proxy`` by the
same script), ``axe`` tests npm's ``axe-core`` (``.venv/axe-core``, likewise).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
import tracemalloc

import numpy as np
import pytest
import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    # Triton reads the switch once, when it is imported, and torch imports triton lazily (collecting
    # test_flash.py already does): set it before any test module, so that without CUDA the Triton kernels
    # (test_triton_flash.py, chapter 18's lesson) run under the interpreter whatever the order of the files.
    os.environ["TRITON_INTERPRET"] = "1"

from attnlib import numpy as anp  # noqa: E402
from attnlib import torch as att

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module (the scripts folder is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    scripts = str(ROOT / "scripts")
    sys.path.insert(0, scripts)  # a script may import its neighbours (provision imports build_book)
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(scripts)
    return module


provision = load_script("provision")


#: The test files that read the suite's one build of the book (``built_book()`` in tests/test_book.py).
BOOK_FILES = frozenset({"test_book.py", "test_browser.py", "test_ch01.py", "test_site_subpath.py"})


def worker_group(nodeid: str) -> str:
    """Which tests ``make test`` hands to one worker process together (pytest-xdist, see below).

    A file's tests stay together, so its module fixtures (a graded class, a running JupyterHub) are made once;
    the files that read the book share one group, so the book is built once.
    """
    name = pathlib.PurePosixPath(nodeid.split("::", 1)[0]).name
    return "book" if name in BOOK_FILES else name


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: without it the suite runs in one process
def pytest_xdist_make_scheduler(config, log):
    """``make test``'s ``-n 2``: each group (:func:`worker_group`) goes whole to one worker, in collection order.

    (pytest-xdist's own ``--dist loadgroup`` split a file's tests between the workers here, pytest 9.2 with
    pytest-xdist 3.8, even with a ``pytestmark`` of ``xdist_group``.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    """Skip, with the install command as the reason, what needs a program this machine lacks."""
    missing = {"browser": None if provision.find_chromium() else provision.NO_CHROMIUM,
               "cjk_font": None if provision.cjk_fonts() else provision.NO_FONT,
               "hub": None if provision.find_proxy() else provision.NO_PROXY,
               "axe": None if provision.find_axe() else provision.NO_AXE}
    for item in items:
        for marker, reason in missing.items():
            if reason and item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))
                break


CUDA = torch.cuda.is_available()
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda,
                                              pytest.mark.skipif(not CUDA, reason="no CUDA device here")])]


@pytest.fixture(params=DEVICES)
def device(request):
    """Every torch device this machine has; CUDA cases are marked and skip cleanly without one."""
    return request.param


def tol(dtype) -> dict:
    """Comparison tolerances for a float dtype."""
    if np.dtype(dtype) == np.float32:
        return {"rtol": 2e-5, "atol": 2e-5}
    return {"rtol": 1e-10, "atol": 1e-12}


def peak_bytes(fn) -> int:
    """The peak of Python-tracked memory (NumPy buffers included) while ``fn()`` runs, in bytes."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def to_torch(x, device="cpu"):
    """A numpy array (or None) as a tensor on ``device``."""
    return None if x is None else torch.as_tensor(np.ascontiguousarray(x), device=device)


def to_numpy(t):
    """A tensor (or None) back to numpy, detached and on the CPU."""
    return None if t is None else t.detach().cpu().numpy()


class Backend:
    """Runs an attnlib function on numpy or torch inputs and returns numpy results."""

    def __init__(self, name: str, device: str = "cpu"):
        self.name, self.device = name, device
        self.lib = anp if name == "numpy" else att

    def __repr__(self):
        return f"{self.name}:{self.device}"

    def arr(self, x):
        return x if self.name == "numpy" or x is None else to_torch(x, self.device)

    def call(self, fname: str, *args, **kwargs):
        args = [self.arr(a) if isinstance(a, np.ndarray) else a for a in args]
        kwargs = {k: self.arr(a) if isinstance(a, np.ndarray) else a for k, a in kwargs.items()}
        result = getattr(self.lib, fname)(*args, **kwargs)
        if isinstance(result, tuple):
            return tuple(self.np(r) for r in result)
        return self.np(result)

    def np(self, r):
        return r if self.name == "numpy" or r is None else to_numpy(r)


@pytest.fixture(params=["numpy", "torch"])
def backend(request, device):
    """Both backends; the torch one on every device."""
    if request.param == "numpy" and device != "cpu":
        pytest.skip("numpy runs on the CPU only")
    return Backend(request.param, device)
