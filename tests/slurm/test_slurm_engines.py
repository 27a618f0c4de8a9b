"""RankCluster on engines that a real Slurm started: a scenario diagnosed right (also by a second
process attached to the cluster), the job cancelled on stop and when the owning process dies, and bad input as a ClusterError within seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nccl_workbook.cluster import ClusterError, RankCluster
from nccl_workbook.launchers import SlurmEngines
from nccl_workbook.runner import run_scenario
from tests.slurm.daemons import SlurmDaemons


def test_batch_script_passes_options_through() -> None:
    script = SlurmEngines(partition="gpu", time_limit="1:00:00", nodes=2, ntasks_per_node=4, gpus_per_node=4,
                          account="proj", extra_sbatch=("--constraint=a100",)).batch_template()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --time=1:00:00", "#SBATCH --nodes=2",
                 "#SBATCH --ntasks-per-node=4", "#SBATCH --gpus-per-node=4", "#SBATCH --account=proj",
                 "#SBATCH --constraint=a100", "#SBATCH --ntasks={n}", "srun --kill-on-bad-exit=0 {program_and_args}"):
        assert line in script.splitlines(), (line, script)


def test_scenario_on_slurm_engines(slurm: SlurmDaemons, make_cluster) -> None:
    engines = SlurmEngines(partition="debug", time_limit="10", gpus_per_node=4, start_timeout_s=120)
    cluster = make_cluster(n_ranks=4, engines=engines)
    cluster.start()
    [job] = cluster.job_ids
    assert [line.split()[2] for line in slurm.jobs()] == ["RUNNING"]
    shown = slurm.run("scontrol", "show", "job", job).stdout
    assert "TimeLimit=00:10:00" in shown and "Partition=debug" in shown and "gres:gpu:4" in shown, shown
    placement = cluster.placement
    # rank order is the launcher's local rank, whatever order the engines registered in
    assert [(p.source, p.job_id, p.local_rank) for p in placement.values()] == [("slurm", job, r) for r in range(4)]
    broken = run_scenario(cluster, "rank0-work-before-barrier", "broken")
    assert broken.culprit_ranks == (0,), broken.diagnosis.message
    fixed = run_scenario(cluster, "rank0-work-before-barrier", "shard-work")
    assert fixed.ok, fixed.diagnosis.message
    # another kernel attaches to it (ipyparallel rebuilds the Slurm engine set from the cluster
    # file): same ranks, same diagnosis; its stop() leaves the job to its owner
    profile_dir, cluster_id = cluster.share_spec.split("::")
    other = RankCluster.attach(profile_dir=profile_dir, cluster_id=cluster_id)
    try:
        assert other.engine_ids == cluster.engine_ids
        assert run_scenario(other, "rank0-work-before-barrier", "broken").culprit_ranks == (0,)
    finally:
        other.stop()
    assert [line.split()[2] for line in slurm.jobs()] == ["RUNNING"]
    cluster.stop()
    assert slurm.jobs() == [], "stop() must cancel the job it submitted"


def test_owner_killed_leaves_no_job(slurm: SlurmDaemons, tmp_path) -> None:
    """A kernel that dies without stop(): its reaper cancels the Slurm job."""
    code = (
        "import sys; from nccl_workbook.cluster import RankCluster; from nccl_workbook.launchers import SlurmEngines\n"
        "c = RankCluster(n_ranks=2, engines=SlurmEngines(start_timeout_s=120)).start()\n"
        "print('ready', c.job_ids[0], flush=True); import time; time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        line = owner.stdout.readline()
        assert line.startswith("ready"), line
        assert len(slurm.jobs()) == 1
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 20
        while slurm.jobs() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert slurm.jobs() == [], "the reaper must scancel the job of an owner that died"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_no_sbatch(monkeypatch: pytest.MonkeyPatch, tmp_path, make_cluster) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match="sbatch.*not there.*login node"):
        make_cluster(n_ranks=2, engines=SlurmEngines()).start()
    assert time.monotonic() - t0 < 5


def test_unknown_partition(slurm: SlurmDaemons, make_cluster) -> None:
    with pytest.raises(ClusterError, match=r"partition 'nope' does not exist; known: debug"):
        make_cluster(n_ranks=2, engines=SlurmEngines(partition="nope")).start()
    assert slurm.jobs() == []


def test_allocation_that_never_starts(slurm: SlurmDaemons, make_cluster) -> None:
    """A job held until later stays pending: an error naming the reason once start_timeout_s is
    over, and the job is cancelled."""
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=r"did not start within start_timeout_s=3 s \(pending, reason: BeginTime\)"):
        make_cluster(n_ranks=2, engines=SlurmEngines(extra_sbatch=("--begin=now+1hour",), start_timeout_s=3)).start()
    assert time.monotonic() - t0 < 20
    assert slurm.jobs() == []


def test_more_than_the_node_has(slurm: SlurmDaemons, make_cluster) -> None:
    """sbatch refuses what no node could ever give (8 GPUs on a 4-GPU node): its message, not a wait."""
    with pytest.raises(ClusterError, match="sbatch.*failed.*Requested node configuration is not available"):
        make_cluster(n_ranks=2, engines=SlurmEngines(gpus_per_node=8)).start()
    assert slurm.jobs() == []
