"""The README's JupyterLab (``nccl-workbook lab --no-browser``) as a person starts it, for the browser
end-to-end test: on loopback, with a token, in throw-away Jupyter/IPython folders, and a check that
it and everything it started (kernels, the cluster a notebook started, Chromium) are gone after.

Usage::

    with LabServer(notebook_dir, state_dir) as lab:
        lab.url("lab/tree/01_rank0_work_before_barrier.ipynb")   # with ?token=...
    assert not processes_of(lab.runtime_dir, marker)           # everything it started is gone
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil

__all__ = ["LabServer", "processes_of", "chromium_path", "describe"]

#: no autosave (the notebook must not be rewritten by a test), and every cell rendered (not only
#: those scrolled into view) so the tests see every stored output. The news pop-up is NOT turned off
#: here: `nccl-workbook lab` must do that itself (its own JupyterLab settings), and the tests check it.
_USER_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
_SERVER_CONFIG = {
    "LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate"},
    # `nccl-workbook lab` does not pass --allow-root; CI and these machines run as root
    "ServerApp": {"allow_root": True},
}


def chromium_path() -> str | None:
    """Debian's Chromium (``apt-get install chromium``), or $NCCL_WORKBOOK_CHROMIUM."""
    for cand in (os.environ.get("NCCL_WORKBOOK_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lab_command() -> list[str]:
    exe = Path(sys.executable).with_name("nccl-workbook")  # the console script the README uses
    if exe.exists():
        return [str(exe), "lab"]
    return [sys.executable, "-c", "import sys; from nccl_workbook.cli import main; sys.exit(main())", "lab"]


class LabServer:
    """``nccl-workbook lab --no-browser`` on 127.0.0.1 with a token, in folders under ``state_dir``.

    ``$NCCL_WORKBOOK_SHARED_CLUSTER`` is removed from its environment, so the notebook's
    ``RankCluster(...).start()`` starts and stops a cluster of its own, as on a person's machine;
    ``$NCCL_WORKBOOK_HOME`` is inherited (the test session's state folder)."""

    def __init__(self, notebook_dir: Path, state_dir: Path, *, start_timeout_s: float = 120.0) -> None:
        self.notebook_dir = notebook_dir
        self.state_dir = state_dir
        self.runtime_dir = state_dir / "runtime"
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = state_dir / "jupyterlab.log"

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> LabServer:
        config = self.state_dir / "config"
        for rel, value in _USER_SETTINGS.items():
            path = config / "lab" / "user-settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        (config / "jupyter_server_config.json").write_text(json.dumps(_SERVER_CONFIG))
        env = {k: v for k, v in os.environ.items() if k not in {"NCCL_WORKBOOK_SHARED_CLUSTER", "MPLBACKEND"}}
        env.update(
            JUPYTER_CONFIG_DIR=str(config),
            JUPYTER_DATA_DIR=str(self.state_dir / "data"),
            JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
            JUPYTERLAB_WORKSPACES_DIR=str(self.state_dir / "workspaces"),
            IPYTHONDIR=str(self.state_dir / "ipython"),
            JUPYTER_TOKEN=self.token,
            PYTHONUNBUFFERED="1",
        )
        cmd = [*_lab_command(), "--no-browser", "--ip", "127.0.0.1", "--port", str(self.port),
               "--notebook-dir", str(self.notebook_dir)]
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.notebook_dir)
        log.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode} before answering; log:\n{self.log_tail()}")
            if self._answers():
                return self
            time.sleep(0.5)
        raise RuntimeError(f"JupyterLab did not answer on port {self.port} within {self.start_timeout_s:g} s; log:\n{self.log_tail()}")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.url("api/status"), timeout=5) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path}{sep}token={self.token}"

    def kernels(self) -> list[dict[str, object]]:
        with urllib.request.urlopen(self.url("api/kernels"), timeout=10) as r:
            return json.loads(r.read())

    def stop(self, timeout_s: float = 60.0) -> None:
        """Ask the server to shut down (it shuts its kernels down first), then make sure it is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            req = urllib.request.Request(self.url("api/shutdown"), method="POST")
            urllib.request.urlopen(req, timeout=10).close()
        except (OSError, urllib.error.URLError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def processes_of(runtime_dir: Path, *markers: str) -> list[psutil.Process]:
    """Live processes started for this test: those whose environment names ``runtime_dir`` as
    $JUPYTER_RUNTIME_DIR (the server, its kernels and everything they started: controller,
    engines, reaper), and those whose command line contains one of ``markers`` (Chromium's
    user-data-dir)."""
    found = []
    me = os.getpid()
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        if p.pid == me or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if any(m in cmd for m in markers) or p.environ().get("JUPYTER_RUNTIME_DIR") == str(runtime_dir):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def describe(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            out.append(f"{p.pid}: {' '.join(p.cmdline())[:120]}")
        except psutil.Error:
            continue
    return out
