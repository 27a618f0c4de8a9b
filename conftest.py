"""Test-wide setup for tests/ and notebooks/: an isolated state folder and temporary folder, and a
check that nothing is left running.

Every test file (unit, dist) and every nbval notebook is followed by a check that no ipyparallel
controller or engine, and no reaper, started under this session's state folder is still alive. A
leftover process fails the item that left it (and is then killed, so it cannot hide the next
failure). nbval cells share a kernel, so notebooks are checked after their last cell. The one
shared cluster (below) is not a leftover; it is stopped, and checked, when the session ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# a pytest-xdist worker inherits the controller's TMPDIR (set below): its folders go beside the controller's,
# not inside them (socket paths under them must stay within AF_UNIX's 107 bytes)
_BASE = os.environ.setdefault("NCCL_WORKBOOK_TEST_TMP_BASE", tempfile.gettempdir())
_HOME = tempfile.mkdtemp(prefix="nccl-workbook-tests-", dir=_BASE)
os.environ["NCCL_WORKBOOK_HOME"] = _HOME  # engines, kernels inherit it; removed when the session ends
# one temporary folder for everything the session starts, removed when it ends: a rank or engine a test
# kills on purpose cannot remove its own (multiprocessing's pymp-*, torchrun's torchelastic_*, torch's
# shared-memory folders), and would otherwise leave them in /tmp at every run
_TMP = tempfile.mkdtemp(prefix="nccl-workbook-tmp-", dir=_BASE)
os.environ["TMPDIR"] = _TMP
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
# also when the session never finishes (a usage error ends pytest before pytest_sessionfinish): not left in /tmp
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
os.environ.setdefault("MPLBACKEND", "Agg")

from nccl_workbook.cluster import SHARED_ENV, RankCluster  # noqa: E402
from tests._procs import assert_nothing_left, leftover_processes  # noqa: E402

#: one 4-rank cluster for the whole session: the dist tests and every notebook attach to it through
#: $NCCL_WORKBOOK_SHARED_CLUSTER instead of paying ~5 s of start-up each
_shared: list[RankCluster] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if any(type(i).__name__ == "IPyNbCell" or "/tests/dist/" in str(i.path) for i in session.items):
        # started by every xdist worker at once, right after a fresh install: 12 engines importing torch on 2 cores
        # with a cold page cache took over the default 90 s in a fresh-clone CI run of stop 50 (the worker crashed)
        cluster = RankCluster(n_ranks=4, engine_timeout_s=240).start()
        _shared.append(cluster)
        os.environ[SHARED_ENV] = cluster.share_spec


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is not None and nextitem.path == item.path:
        return
    assert_nothing_left()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for cluster in _shared:
        cluster.stop()
    os.environ.pop(SHARED_ENV, None)
    for p in leftover_processes():
        try:
            p.kill()
        except Exception:  # noqa: BLE001
            pass
    shutil.rmtree(_HOME, ignore_errors=True)
    shutil.rmtree(_TMP, ignore_errors=True)
