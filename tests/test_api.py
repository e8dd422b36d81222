"""Both backends expose the same names with the same signatures."""

import inspect

from attnlib import numpy as anp
from attnlib import torch as att


def test_same_public_names():
    assert sorted(anp.__all__) == sorted(att.__all__)
    for name in anp.__all__:
        assert callable(getattr(anp, name)) and callable(getattr(att, name))


def test_same_signatures():
    for name in anp.__all__:
        assert inspect.signature(getattr(anp, name)) == inspect.signature(getattr(att, name)), name


def test_import_attnlib_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, attnlib; from attnlib import numpy; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
