"""RankCluster on engines that Open MPI's mpiexec started: a scenario diagnosed right, local ranks
from OMPI_COMM_WORLD_LOCAL_RANK, nothing left after stop."""

from __future__ import annotations

import time

import pytest

from nccl_workbook.cluster import ClusterError
from nccl_workbook.launchers import MPIEngines
from nccl_workbook.runner import run_scenario


def test_scenario_on_mpi_engines(mpi: None, make_cluster) -> None:
    # 4 processes on 2 cores: Open MPI refuses more processes than slots unless told
    engines = MPIEngines(mpiexec_args=("--oversubscribe",), allow_run_as_root=True)
    cluster = make_cluster(n_ranks=4, engines=engines).start()
    assert [(p.source, p.local_rank, p.launcher_rank) for p in cluster.placement.values()] == [
        ("mpi", r, r) for r in range(4)
    ]
    broken = run_scenario(cluster, "rank0-work-before-barrier", "broken")
    assert broken.culprit_ranks == (0,), broken.diagnosis.message
    fixed = run_scenario(cluster, "rank0-work-before-barrier", "shard-work")
    assert fixed.ok, fixed.diagnosis.message


def test_no_mpiexec(make_cluster) -> None:
    with pytest.raises(ClusterError, match="needs `mpiexec-nope` on PATH"):
        make_cluster(n_ranks=2, engines=MPIEngines(mpiexec="mpiexec-nope")).start()


def test_mpiexec_that_refuses_to_start(mpi: None, monkeypatch: pytest.MonkeyPatch, make_cluster) -> None:
    """As root without Open MPI's switch, mpiexec exits at once: its message, not a wait."""
    monkeypatch.delenv("OMPI_ALLOW_RUN_AS_ROOT", raising=False)
    monkeypatch.delenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", raising=False)
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=r"mpi\(mpiexec\) exited( with code 1)? before 2 engines registered.*detected an attempt to run as root"):
        make_cluster(n_ranks=2, engines=MPIEngines(allow_run_as_root=False)).start()
    assert time.monotonic() - t0 < 20
