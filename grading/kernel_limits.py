"""A memory limit for the kernels nbgrader starts while autograding.

nbgrader's ``Execute`` preprocessor (an nbclient ``NotebookClient``) starts
one kernel per notebook with its ``kernel_manager_class``; jupyter_client's
local provisioner hands the launch keywords on to ``subprocess.Popen``.  The
kernel manager below adds a ``preexec_fn`` that sets ``RLIMIT_AS`` in the
kernel process just before it execs, so a student's cell that asks for far too
much memory gets a ``MemoryError`` in that cell (which then scores 0) instead
of bringing the machine down.  Only the kernel is limited, not nbgrader.

Use ``LimitedExecute`` in place of ``Execute`` in
``Autograde.autograde_preprocessors`` and set
``LimitedKernelManager.memory_limit`` (bytes; 0 = no limit).
"""

from __future__ import annotations

import resource

from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import Execute
from traitlets import Integer


def _limit_address_space(limit: int):
    """A ``preexec_fn`` that caps the child's address space at ``limit`` bytes."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


class LimitedKernelManager(AsyncKernelManager):
    """An async kernel manager whose kernels may map at most ``memory_limit`` bytes."""

    memory_limit = Integer(0, help="Address-space limit of each kernel, in bytes (0: none).").tag(config=True)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.memory_limit > 0:
            kw["preexec_fn"] = _limit_address_space(self.memory_limit)
        return await super()._async_launch_kernel(kernel_cmd, **kw)


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` with kernels started by ``LimitedKernelManager`` (configured as ``Execute``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", LimitedKernelManager)
        super().__init__(*args, **kwargs)
