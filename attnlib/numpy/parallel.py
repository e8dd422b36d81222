"""Row-parallel execution for the NumPy backend.

NumPy's elementwise ufuncs (``exp`` above all) run on one core, while the
BLAS matrix products use them all.  For attention on long sequences the
exponentials cost about as much as both products, so the tiles of query
rows are shared out among worker threads; NumPy releases the GIL inside
ufuncs and BLAS calls, so the threads really run at once.  While they do,
BLAS is limited to one thread each, so the machine is not oversubscribed.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import cache


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# None means one worker per core; 1 switches the threads off.
WORKERS: int | None = None


# Each worker gets at least this many tiles, so that the workers' tile buffers
# together stay a small fraction of the full score matrix.
MIN_TILES_PER_WORKER = 4


def chunks(n_rows: int, step: int) -> list[slice]:
    """Split ``n_rows`` rows into contiguous chunks, one per worker, each a whole number of tiles."""
    tiles = max(1, math.ceil(n_rows / step))
    workers = max(1, min(WORKERS or cores(), tiles // MIN_TILES_PER_WORKER))
    per_worker = math.ceil(tiles / workers) * step
    return [slice(start, min(start + per_worker, n_rows)) for start in range(0, n_rows, per_worker)] or [slice(0, 0)]


def run(fn, parts: list) -> None:
    """Call ``fn(part)`` for every part: in the calling thread if there is one, else on the pool."""
    if len(parts) == 1:
        fn(parts[0])
        return
    with blas_controller().limit(limits=1, user_api="blas"):
        for future in [pool().submit(fn, part) for part in parts]:
            future.result()  # re-raises a worker's exception here


@cache
def pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=cores(), thread_name_prefix="attnlib")


@cache
def blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries (inspected once, on first use)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
