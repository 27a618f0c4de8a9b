"""Two hosts made of network namespaces (tests/multihost/hosts.py), with a Slurm whose controller
runs on ``nwb-a`` and a slurmd on each host: marked ``multihost``; skipped with the reason where there
is no root, no ``ip`` or no Slurm, a failure under ``CI=true``. Namespaces, daemons and jobs are
removed by finalizers; afterwards no Slurm/munge/MPI process and no namespace of the tests is left."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.multihost.hosts import TwoHosts
from tests.slurm.daemons import cluster_factory, Node, SlurmDaemons, leftover_daemons, require


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/multihost/" in str(item.path):
            item.add_marker(pytest.mark.multihost)


@pytest.fixture(scope="module")
def hosts(request: pytest.FixtureRequest) -> TwoHosts:
    require(binaries=("ip", "unshare"), what="the multi-host tests")
    two = TwoHosts()
    request.addfinalizer(two.remove)
    return two.create()


@pytest.fixture(scope="module")
def slurm2(hosts: TwoHosts, request: pytest.FixtureRequest) -> SlurmDaemons:
    require(binaries=("munged", "slurmctld", "slurmd", "sbatch", "srun"), what="the multi-host Slurm tests")
    daemons = SlurmDaemons([Node(h, hosts.addr(h), prefix=hosts.prefix(h)) for h in hosts.hosts])
    request.addfinalizer(daemons.stop)
    return daemons.start()


@pytest.fixture(scope="module", autouse=True)
def _nothing_left() -> Iterator[None]:
    since = time.time()
    yield
    deadline = time.monotonic() + 10
    while (left := leftover_daemons(since)) and time.monotonic() < deadline:
        time.sleep(0.2)
    namespaces = [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                  if ns.startswith("nwb-") and ns.endswith(f"-{os.getpid()}")]
    assert not left and not namespaces, f"left: {left} namespaces: {namespaces}"


@pytest.fixture
def make_cluster(request: pytest.FixtureRequest):  # noqa: ANN201
    """RankCluster(**options), stopped by a finalizer (see tests.slurm.daemons.cluster_factory)."""
    return cluster_factory(request)
