"""attnlib: the small, tested library behind the course on attention.

Two backends expose the same names with the same signatures::

    from attnlib import numpy as anp   # readable reference, float64 by default
    from attnlib import torch as att   # any device, dtype/device taken from inputs

The backends are imported on demand, so ``import attnlib`` never pulls in torch.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
