"""Finding processes a test or notebook left behind (used by the root conftest.py)."""

from __future__ import annotations

import os
import time

import psutil
import pytest

_HOME = os.environ["NCCL_WORKBOOK_HOME"]


def _shared_id() -> str | None:
    spec = os.environ.get("NCCL_WORKBOOK_SHARED_CLUSTER")
    return spec.split("::", 1)[1] if spec and "::" in spec else None


def leftover_processes() -> list[psutil.Process]:
    """Controller/engine/nanny/fork-server processes of clusters under this session's state folder, and reapers,
    except those of the session's shared cluster."""
    shared = _shared_id()
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if p.pid == os.getpid():
            continue
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if "nccl_workbook._reaper" in cmd and _HOME in cmd:
                if not (shared and shared in cmd):
                    found.append(p)
                continue
            if "ipyparallel" in cmd or "nccl_workbook._zygote" in cmd:  # engines forked by it too
                env = p.environ()
                if env.get("IPP_PROFILE_DIR", "").startswith(_HOME) and env.get("IPP_CLUSTER_ID") != shared:
                    found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def assert_nothing_left(grace_s: float = 8.0) -> None:
    deadline = time.monotonic() + grace_s
    left = leftover_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftover_processes()
    if left:
        desc = [f"{p.pid}: {' '.join(p.cmdline())[:100]}" for p in left if p.is_running()]
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        if desc:
            pytest.fail(f"processes left behind: {desc}", pytrace=False)

