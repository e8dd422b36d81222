"""Real Jupyter servers and browsers for the tests: free ports, bounded start-up, always stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import socket
import subprocess
import time
import urllib.error
import urllib.request

from conftest import load_script

lab = load_script("lab")


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate ``process``, kill it if it lingers ``timeout`` seconds, and reap it."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


def status(base: str, token: str) -> int | None:
    """HTTP status of ``/api/status`` (None while nothing answers)."""
    request = urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


@contextlib.contextmanager
def lab_server(work: pathlib.Path, tmp: pathlib.Path, env: dict, token: str, extra_args=(), start_timeout=90):
    """``make lab``'s JupyterLab (``scripts/lab.py``'s command) on ``work``; yields its base URL; always stopped.

    Its runtime files, workspaces and log (``tmp/server.log``) stay in ``tmp``;
    there is no class exchange.  As in ``make lab``, nbgrader's plugin is the Chinese copy.
    """
    port = free_port()
    env = lab.with_chinese_nbgrader(env, tmp / "jupyter-data")
    env = {**env, "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"), "NBGRADER_EXCHANGE": str(tmp / "none"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces")}
    args = ["--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", *extra_args]
    log_path = tmp / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(lab.lab_command(args, work), env=env, cwd=work, stdout=log,
                                  stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + start_timeout
            while status(base, token) != 200:
                assert server.poll() is None and time.monotonic() < deadline, \
                    f"Jupyter 服务器没有在 {start_timeout} 秒内启动：\n{log_path.read_text()[-3000:]}"
                time.sleep(0.3)
            yield base
        finally:
            stop(server)


def devtools_page(port: int) -> dict:
    """The first page target of a Chromium listening for DevTools on ``port``."""
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5))
    return next(t for t in targets if t["type"] == "page")


@contextlib.contextmanager
def chromium(viewport=(1280, 900)):
    """A headless page of the system's Chromium (Debian's ``chromium``), driven by Playwright; always closed.

    Playwright is pointed at that executable: nothing is downloaded.  Tests that use it carry the
    ``browser`` marker, so they are skipped with one line naming the install command where it is missing.
    """
    from playwright.sync_api import sync_playwright

    from conftest import provision

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=provision.find_chromium(), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-extensions"])
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]}, locale="zh-CN")
            page.set_default_timeout(60_000)
            yield page
        finally:
            browser.close()


async def terminal_output(base: str, token: str, typed: str, until: str, timeout: float = 240) -> str:
    """Open a terminal in a running lab (as the browser does), type ``typed``; return its output up to ``until``."""
    from tornado.websocket import websocket_connect

    request = urllib.request.Request(f"{base}/api/terminals", data=b"{}", method="POST",
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        name = json.load(response)["name"]
    ws = await websocket_connect(f"{base.replace('http', 'ws')}/terminals/websocket/{name}?token={token}")
    out = ""
    try:
        await ws.write_message(json.dumps(["stdin", typed + "\r"]))
        deadline = time.monotonic() + timeout
        while until not in out:
            left = deadline - time.monotonic()
            assert left > 0, f"终端里的命令没有在 {timeout} 秒内结束，输出：\n{out[-4000:]}"
            message = await asyncio.wait_for(ws.read_message(), left)
            assert message is not None, f"终端关闭了，输出：\n{out[-4000:]}"
            kind, *data = json.loads(message)
            if kind == "stdout":
                out += data[0]
    finally:
        ws.close()
        # wait for the closing handshake (tornado aborts it after 5 s): a socket still open when the event loop
        # ends is garbage-collected later, and its ResourceWarning fails whichever test happens to be running
        with contextlib.suppress(asyncio.TimeoutError):
            while await asyncio.wait_for(ws.read_message(), 10) is not None:
                pass
    return out
