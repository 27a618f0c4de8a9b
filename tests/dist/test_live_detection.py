"""Live detection on real ranks: the culprit is named while the group is still alive."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.runner import run_scenario

ID = "rank0-work-before-barrier"


def test_named_well_before_a_10s_timeout(cluster: RankCluster) -> None:
    # rank 0 is 6 s late (8 samples x 0.75 s) under a 10 s group timeout: the run succeeds in the
    # end, but the workbook names rank 0 within 3 s of the others starting to wait
    r = run_scenario(cluster, ID, "broken", timeout_s=10.0, seconds_per_sample=0.75)
    assert r.ok
    assert r.hang is not None and r.hang.culprit_ranks == (0,) and r.hang.op == "BARRIER"
    assert r.hang.detected_after_s < 3.0
    assert r.hang.resolved  # the barrier completed: it was a long wait, not a hang
    assert "generate_samples" in r.hang.where[0]
    assert "generate_sample" in r.hang.stacks[0] and "barrier" in r.hang.stacks[1]


def test_broken_run_json_carries_the_live_detection(cluster: RankCluster) -> None:
    r = run_scenario(cluster, ID, "broken")
    d = r.to_json()
    assert d["detected_culprits"] == [0]
    assert 0 < d["detected_after_s"] < r.pg_timeout_s
    assert set(d["stacks"]) == {"0", "1", "2", "3"}
    assert "paced" in d["stacks"]["0"] or "generate_sample" in d["stacks"]["0"]


def test_stacks_on_demand_from_outside(cluster: RankCluster) -> None:
    import subprocess
    import sys

    from nccl_workbook._state import local_engine_pids

    pids = [pid for ps in local_engine_pids().values() for pid in ps]
    assert {info.pid for info in cluster.engines.values()} <= set(pids)
    out = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "stacks"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("-- pid ") >= 4
    assert "MainThread" in out.stdout or "py-spy failed" in out.stdout  # py-spy needs ptrace rights
