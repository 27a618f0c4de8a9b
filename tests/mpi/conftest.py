"""Tests of engines started by Open MPI's mpiexec: marked ``mpi``; skipped with the reason where there
is no root or no mpiexec (``WITH_SLURM=1 scripts/setup.sh`` installs Debian's openmpi-bin), a failure
under ``CI=true``. After every test file no mpirun/orted the tests started may be left."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.slurm.daemons import cluster_factory, no_daemons_left, require


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/mpi/" in str(item.path):
            item.add_marker(pytest.mark.mpi)


@pytest.fixture
def mpi(monkeypatch: pytest.MonkeyPatch) -> None:
    require(binaries=("mpiexec",), what="the MPI tests")
    # one host: the controller stays on loopback (non-loopback addresses: tests/multihost)
    monkeypatch.setenv("NCCL_WORKBOOK_HOST_ADDR", "127.0.0.1")


@pytest.fixture(scope="module", autouse=True)
def _nothing_left() -> Iterator[None]:
    yield from no_daemons_left(time.time())


@pytest.fixture
def make_cluster(request: pytest.FixtureRequest):  # noqa: ANN201
    """RankCluster(**options), stopped by a finalizer (see tests.slurm.daemons.cluster_factory)."""
    return cluster_factory(request)
