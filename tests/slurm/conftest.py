"""Tests against a real single-node Slurm (tests/slurm/daemons.py): marked ``slurm``; skipped with
the reason where there is no root or no Slurm (``WITH_SLURM=1 scripts/setup.sh`` installs it), a
failure under ``CI=true``. The daemons (up in about 1 s) are started for each test file and stopped
by a finalizer; after it no Slurm/munge/MPI process the tests started may be left."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from tests.slurm.daemons import Node, SlurmDaemons, cluster_factory, no_daemons_left, require


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/slurm/" in str(item.path):
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="module")
def slurm(request: pytest.FixtureRequest) -> SlurmDaemons:
    require(binaries=("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "sinfo"),
            what="the Slurm tests")
    daemons = SlurmDaemons([Node(socket.gethostname(), "127.0.0.1")])
    request.addfinalizer(daemons.stop)
    daemons.start()
    # sbatch/squeue of the cluster under test, and its reaper, see SLURM_CONF; one node, so the
    # controller stays on loopback (non-loopback addresses are tested in tests/multihost)
    env = {**daemons.env, "NCCL_WORKBOOK_HOST_ADDR": "127.0.0.1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)

    def restore() -> None:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    request.addfinalizer(restore)
    return daemons


@pytest.fixture(scope="module", autouse=True)
def _no_daemons_left() -> Iterator[None]:
    """Set up before (so torn down after) the module's daemons: checks that they, their jobs'
    steps and any mpirun are gone."""
    yield from no_daemons_left(time.time())


@pytest.fixture
def make_cluster(request: pytest.FixtureRequest):  # noqa: ANN201
    """RankCluster(**options), stopped by a finalizer (see tests.slurm.daemons.cluster_factory)."""
    return cluster_factory(request)
