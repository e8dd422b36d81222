"""Limits for the kernels nbgrader starts while autograding: memory, and an unprivileged user.

nbgrader's ``Execute`` preprocessor (an nbclient ``NotebookClient``) starts
one kernel per notebook with its ``kernel_manager_class``; jupyter_client's
local provisioner hands the launch keywords on to ``subprocess.Popen``.  The
kernel manager below uses that to

* cap the kernel's address space (``RLIMIT_AS``, set by a ``preexec_fn`` just
  before the kernel execs), so a student's cell that asks for far too much
  memory gets a ``MemoryError`` in that cell (which then scores 0) instead of
  bringing the machine down;
* optionally run the kernel as an unprivileged system user, through
  ``grading/sandbox_launch.py``: in its own view of the file system, where the
  class's submissions, gradebook and source notebooks are covered, with its own
  home folder and its connection file in a per-kernel folder that user owns
  (see ``grading/sandbox.py``), so the student's code has that user's rights,
  not the grader's.

Only the kernel is limited, not nbgrader.  Use ``LimitedExecute`` in place of
``Execute`` in ``Autograde.autograde_preprocessors``; configure
``LimitedKernelManager.memory_limit`` (bytes; 0 = no limit) and, for the
sandbox, ``sandbox_uid``, ``sandbox_gid``, ``sandbox_root``, ``sandbox_reach``
and ``sandbox_hide``.
"""

from __future__ import annotations

import os
import pathlib
import queue
import resource
import sys
import time
import uuid

import nbformat
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import Integer, List, Unicode

LAUNCHER = pathlib.Path(__file__).resolve().with_name("sandbox_launch.py")
#: Address-space cap of a student's kernel while grading, in GB (``nbgrader_config.py``, ``make grade-class``).
DEFAULT_MEMORY_GB = 4.0


def _limit_address_space(limit: int):
    """A ``preexec_fn`` that caps the child's address space at ``limit`` bytes."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def launch_command(uid: int, gid: int, reach, hide, command: list) -> list:
    """``command`` wrapped to start through ``sandbox_launch.py`` as ``uid``/``gid``, reaching and hiding paths."""
    wrapped = [sys.executable, str(LAUNCHER), "--uid", str(uid), "--gid", str(gid)]
    for path in reach:
        wrapped += ["--reach", path]
    for path in hide:
        wrapped += ["--hide", path]
    return [*wrapped, "--", *command]


#: What a sandboxed kernel keeps of the grader's environment (no tokens, no paths of the course);
#: ATTNLIB_STUDENT is the graded student, whose variant the kernel shows (grading/variants.py).
KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONIOENCODING", "PYTHONHASHSEED",
            "MPLBACKEND", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "ATTNLIB_STUDENT")


def sandbox_environment(env: dict, home: pathlib.Path) -> dict:
    """The part of ``env`` a sandboxed kernel gets, with every per-user folder it writes moved to ``home``."""
    kept = {k: v for k, v in env.items() if k in KEEP_ENV or k.startswith("LC_")}
    for name in ("HOME", "IPYTHONDIR", "MPLCONFIGDIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR"):
        kept[name] = str(home)
    return kept


class LimitedKernelManager(AsyncKernelManager):
    """An async kernel manager whose kernels get a memory cap and, optionally, an unprivileged user."""

    memory_limit = Integer(0, help="Address-space limit of each kernel, in bytes (0: none).").tag(config=True)
    sandbox_uid = Integer(-1, help="Run kernels as this user id (-1: as the grader).").tag(config=True)
    sandbox_gid = Integer(-1, help="... with this group id.").tag(config=True)
    sandbox_root = Unicode("", help="A folder the sandbox user can traverse; each kernel gets a home in it.").tag(
        config=True)
    sandbox_reach = List(Unicode(), help="Paths the sandboxed kernel must reach (its Python, attnlib).").tag(
        config=True)
    sandbox_hide = List(Unicode(), help="Paths covered in the sandboxed kernel's view (the class's files).").tag(
        config=True)

    @property
    def sandboxed(self) -> bool:
        return self.sandbox_uid >= 0

    async def _async_pre_start_kernel(self, **kw):
        if self.sandboxed and not self.connection_file:
            # the kernel must read its connection file as the sandbox user: write it into a folder that user owns
            home = pathlib.Path(self.sandbox_root) / f"kernel-{uuid.uuid4().hex}"
            home.mkdir(mode=0o700)
            os.chown(home, self.sandbox_uid, self.sandbox_gid)
            self.connection_file = str(home / "connection.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self.memory_limit > 0:
            kw["preexec_fn"] = _limit_address_space(self.memory_limit)
        if self.sandboxed:
            home = pathlib.Path(self.connection_file).parent
            os.chown(self.connection_file, self.sandbox_uid, self.sandbox_gid)
            kw["env"] = sandbox_environment(kw.get("env") or os.environ, home)
            kernel_cmd = self.sandbox_command(kernel_cmd)
        return await super()._async_launch_kernel(kernel_cmd, **kw)

    def sandbox_command(self, command: list) -> list:
        """``command`` started through ``sandbox_launch.py`` as the sandbox user."""
        return launch_command(self.sandbox_uid, self.sandbox_gid, self.sandbox_reach, self.sandbox_hide, command)


HUNG = ("单元超时，中断也没能让它停下（代码可能捕获了 KeyboardInterrupt）：评分时重启了内核，"
        "并重新运行了前面的单元，本单元记为出错")
DIED = ("内核在这个单元里退出或崩溃了（例如调用了 os._exit，或进程被杀死）：评分时重启了内核，"
        "并重新运行了前面的单元，本单元记为出错")


class LimitedExecute(Execute):
    """nbgrader's ``Execute`` with kernels started by ``LimitedKernelManager`` (configured as ``Execute``).

    A cell that outlives its timeout is interrupted, as in nbgrader.  When the
    interrupt does not stop it (the code swallows ``KeyboardInterrupt``), or
    the kernel dies in the cell (``os._exit``, a signal, the OOM killer),
    nbgrader gives up on the whole notebook; here the kernel is restarted
    instead, the cells before it are run again silently (skipping any that
    hung, died or timed out) to rebuild the state, the cell gets an error
    output, and grading goes on with the next cell, as it does after an
    interruptible loop.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", LimitedKernelManager)
        super().__init__(*args, **kwargs)

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        try:
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError) as exc:
            ename, why = ("CellTimeoutError", HUNG) if isinstance(exc, CellTimeoutError) else ("DeadKernelError", DIED)
            cell.outputs = [o for o in cell.outputs if o.get("output_type") != "error"]
            cell.outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=why, traceback=[f"{ename}: {why}"]))
            await self._restart_and_replay(cell_index)
            return cell

    execute_cell = run_sync(async_execute_cell)  # nbclient binds the sync name to its own coroutine

    async def _restart_and_replay(self, cell_index: int) -> None:
        """A fresh kernel that has run every earlier code cell again, except the ones that hung, died or timed out."""
        await ensure_async(self.km.restart_kernel(now=True))
        await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
        for cell in self.nb.cells[:cell_index]:
            if cell.cell_type == "code" and not _timed_out(cell):
                msg_id = self.kc.execute(cell.source, store_history=False, allow_stdin=False)
                await self._wait_for_reply_to(msg_id)

    async def _wait_for_reply_to(self, msg_id: str) -> None:
        """Wait (at most the cell timeout) for the shell reply to ``msg_id``; raise if the kernel hangs again."""
        deadline = time.monotonic() + (self.timeout or 60)
        while time.monotonic() < deadline:
            try:
                reply = await ensure_async(self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                break
            if reply["parent_header"].get("msg_id") == msg_id:
                return
        raise CellTimeoutError("re-running the earlier cells after a kernel restart timed out")


def _timed_out(cell) -> bool:
    """Whether a cell's outputs record a timeout, a hang or a dead kernel (every cell not to run again)."""
    return any(o.get("ename") in ("CellTimeoutError", "DeadKernelError") for o in cell.get("outputs", []))
