"""Engines forked from the fork server (nccl_workbook._zygote), and the way back to ordinary engines
when there is no server. Uses a 2-rank cluster of its own, not the shared one."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import psutil
import pytest

from nccl_workbook import _zygote
from nccl_workbook.cluster import SHARED_ENV, RankCluster
from nccl_workbook._state import local_engine_pids
from nccl_workbook.results import RankStatus

from .programs import die_on_rank, use_fixes_like_a_user


def _ask_raw(cluster_id: str, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(_zygote.socket_path(cluster_id))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        return json.loads(_zygote._read_all(s))


def test_forked_engines_run_crash_and_fall_back_without_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SHARED_ENV, raising=False)
    with RankCluster(n_ranks=2, fork_engines=True) as rc:
        cid = rc._ipp_cluster.cluster_id
        server = psutil.Process(rc._zygote.pid)
        folder = _zygote.zygote_dir(cid)
        assert os.stat(folder).st_mode & 0o777 == 0o700
        assert os.stat(_zygote.socket_path(cid)).st_mode & 0o777 == 0o600

        # every engine is a child of the server, and what the tools see as engines are exactly those
        pids = {info.pid for info in rc.engines.values()}
        assert {p.pid for p in server.children()} >= pids
        assert sorted(local_engine_pids()[cid]) == sorted(pids)
        ok = rc.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0)
        assert [r.status for r in ok.reports] == [RankStatus.OK] * 2, [r.error for r in ok.reports]

        # a bad request gets an answer, and the server keeps serving
        assert "error" in _ask_raw(cid, b"not json")
        assert "argv" in _ask_raw(cid, b'{"argv": []}')["error"]

        # an engine that dies is reaped by the server, which leaves its exit code for the launcher
        crashed = rc.run(die_on_rank, 1, pg_timeout_s=3.0, deadline_s=30)
        assert crashed.reports[1].status is RankStatus.CRASHED
        dead_pid = crashed.reports[1].pid
        again = rc.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0)
        assert [r.status for r in again.reports] == [RankStatus.OK] * 2
        replacement = max(rc.engines, key=lambda e: e)
        assert rc.engines[replacement].pid in {p.pid for p in server.children()}
        assert not psutil.pid_exists(dead_pid) or psutil.Process(dead_pid).status() != psutil.STATUS_ZOMBIE

        # without the server, a replacement engine is started the ordinary way
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        crashed = rc.run(die_on_rank, 0, pg_timeout_s=3.0, deadline_s=30)
        assert crashed.reports[0].status is RankStatus.CRASHED
        again = rc.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0)
        assert [r.status for r in again.reports] == [RankStatus.OK] * 2, again.notes
        newest = rc.engines[max(rc.engines)]
        assert "ipyparallel.engine" in " ".join(psutil.Process(newest.pid).cmdline())
    # stopped: the server's folder is gone (the root conftest checks that no process is left)
    deadline = time.monotonic() + 5
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(folder)


def test_fork_engines_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_WORKBOOK_FORK_ENGINES", "0")
    assert RankCluster(n_ranks=2).fork_engines is False
    monkeypatch.delenv("NCCL_WORKBOOK_FORK_ENGINES")
    assert RankCluster(n_ranks=2).fork_engines is True
    assert RankCluster(n_ranks=2, fork_engines=False).fork_engines is False
