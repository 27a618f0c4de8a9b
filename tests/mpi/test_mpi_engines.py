"""RankCluster on engines that Open MPI's mpiexec started: a scenario diagnosed right, local ranks
from OMPI_COMM_WORLD_LOCAL_RANK, nothing left after stop."""

from __future__ import annotations

import pytest

from nccl_workbook.cluster import ClusterError, RankCluster
from nccl_workbook.launchers import MPIEngines
from nccl_workbook.runner import run_scenario


def test_scenario_on_mpi_engines(mpi: None) -> None:
    # 4 processes on 2 cores: Open MPI refuses more processes than slots unless told
    engines = MPIEngines(mpiexec_args=("--oversubscribe",), allow_run_as_root=True)
    cluster = RankCluster(n_ranks=4, engines=engines)
    try:
        cluster.start()
        assert [(p.source, p.local_rank, p.launcher_rank) for p in cluster.placement.values()] == [
            ("mpi", r, r) for r in range(4)
        ]
        broken = run_scenario(cluster, "rank0-work-before-barrier", "broken")
        assert broken.culprit_ranks == (0,), broken.diagnosis.message
        fixed = run_scenario(cluster, "rank0-work-before-barrier", "shard-work")
        assert fixed.ok, fixed.diagnosis.message
    finally:
        cluster.stop()


def test_no_mpiexec() -> None:
    with pytest.raises(ClusterError, match="needs `mpiexec-nope` on PATH"):
        RankCluster(n_ranks=2, engines=MPIEngines(mpiexec="mpiexec-nope")).start()
