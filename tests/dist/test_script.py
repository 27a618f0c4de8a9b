"""A user's script on the workbook's cluster (notebook 92): run as torchrun would, diagnosed like a
scenario, its own init_process_group joining the run, sys.exit codes respected."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_workbook.cluster import RankCluster
from nccl_workbook.status import Outcome
from nccl_workbook.watch.script import example_script, run_script


def test_healthy_script_is_ok_with_steps_marked(cluster: RankCluster, tmp_path: Path) -> None:
    r = run_script(cluster, example_script(), ["--steps", "8", "--out-dir", str(tmp_path)], pg_timeout_s=3)
    assert r.ok and r.hang is None and not r.has_ground_truth
    assert [p.steps for p in r.per_rank] == [8] * 4
    grads = r.trace[(r.trace["kind"] == "collective") & (r.trace["name"] == "ALLREDUCE")]
    assert grads["rank"].nunique() == 4 and len(grads) >= 4 * 8  # DDP's bucket all-reduce, seen through the hook


def test_rank0_evaluation_is_named_live_and_by_the_diagnosis(cluster: RankCluster, tmp_path: Path) -> None:
    r = run_script(cluster, example_script(), f"--steps 8 --eval-interval 4 --fault rank0-eval --stall-s 4 "
                   f"--out-dir {tmp_path}", pg_timeout_s=2)
    assert r.outcome is Outcome.TIMEOUT and r.culprit_ranks == (0,) and r.failed_op == "ALLREDUCE"
    assert r.hang is not None and r.hang.culprit_ranks == (0,) and r.hang.detected_after_s < 2
    assert "estimate_loss" in r.hang.stacks[0]
    fixed = run_script(cluster, example_script(), f"--steps 8 --eval-interval 4 --fault rank0-eval --stall-s 4 "
                       f"--eval-sync side-group --out-dir {tmp_path}", pg_timeout_s=2)
    assert fixed.ok and fixed.hang is not None and fixed.hang.resolved and fixed.hang.culprit_ranks == (0,)


def test_exit_codes_and_a_missing_file(cluster: RankCluster, tmp_path: Path) -> None:
    script = tmp_path / "exits.py"
    script.write_text("import os, sys\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
                      "code = 3 if dist.get_rank() == 1 else 0\ndist.destroy_process_group()\nsys.exit(code)\n")
    r = run_script(cluster, script, world_size=2, pg_timeout_s=3)
    assert [p.status.value for p in r.per_rank] == ["ok", "error"] and "exited with code 3" in r.per_rank[1].error
    with pytest.raises(FileNotFoundError, match="no such script"):
        run_script(cluster, tmp_path / "nope.py")
