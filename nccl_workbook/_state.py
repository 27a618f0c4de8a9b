"""Where the workbook keeps its state, and helpers for the processes it starts or looks at.

- :func:`state_dir`: ``$NCCL_WORKBOOK_HOME`` (default ``~/.cache/nccl-workbook``): the ipyparallel
  profile, connection files, logs, the fork server's socket folder and the spill files of running
  ranks live here, never in ``~/.ipython``.
- :func:`package_pythonpath`: a ``PYTHONPATH`` that lets child processes (engines, the reaper, a
  watched job's ranks) import this package even when it runs from a source tree.
- :func:`local_engine_pids`, :func:`py_spy_dump`: find the workbook's engines on this host and read
  a live process's stack from outside (``nccl-workbook stacks``, ``attach``).

Imports nothing from the package at module level (the fork server's marker is read lazily).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

__all__ = ["state_dir", "package_parent", "package_pythonpath", "this_host", "local_engine_pids", "py_spy_dump"]


def state_dir() -> Path:
    """Folder for the workbook's state (created if missing)."""
    base = os.environ.get("NCCL_WORKBOOK_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nccl-workbook"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def package_parent() -> str:
    """The folder that holds the ``nccl_workbook`` package."""
    return str(Path(__file__).resolve().parent.parent)


def package_pythonpath(existing: str | None = None) -> str:
    """``PYTHONPATH`` with the package's parent first, then ``existing`` (default: this process's)."""
    rest = os.environ.get("PYTHONPATH", "") if existing is None else existing
    return os.pathsep.join(p for p in [package_parent(), rest] if p)


def this_host() -> str:
    return socket.gethostname()


def local_engine_pids(profile_dir: str | None = None) -> dict[str, list[int]]:
    """cluster id -> pids of the ipyparallel engines on this host started under the workbook's
    state folder (or ``profile_dir``), found from their environment."""
    import psutil

    from nccl_workbook._zygote import CMD_MARKER

    base = profile_dir or str(state_dir())
    found: dict[str, list[int]] = {}
    for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if CMD_MARKER in cmd:
                # an engine forked from the fork server shares its command line; the server is
                # the one whose parent is not a server
                if CMD_MARKER not in " ".join(psutil.Process(p.info["ppid"]).cmdline()):
                    continue
            elif "ipyparallel.engine" not in cmd or "nanny" in cmd:
                continue
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("IPP_PROFILE_DIR", "").startswith(base):
            found.setdefault(env.get("IPP_CLUSTER_ID", "?"), []).append(p.pid)
    return {k: sorted(v) for k, v in found.items()}


def py_spy_dump(pid: int, *, timeout_s: float = 10.0, native: bool = False) -> str:
    """``py-spy dump --pid PID``: a live process's Python (and with ``native``, C/C++) stacks,
    from outside the process. Needs permission to ptrace it (root, or the same user with
    ptrace_scope 0). Returns the text, or a one-line reason it could not."""
    exe = shutil.which("py-spy") or (sys.prefix + "/bin/py-spy")
    cmd = [exe, "dump", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return "(py-spy is not installed: pip install py-spy)"
    except subprocess.TimeoutExpired:
        return f"(py-spy did not answer within {timeout_s:g} s)"
    return out.stdout if out.returncode == 0 else f"(py-spy failed: {out.stderr.strip()[:300]})"
