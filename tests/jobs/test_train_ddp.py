"""The example training script under torchrun (4 ranks, gloo on CPU), healthy and with each
fault, and the test helper's deadline."""

from __future__ import annotations

import time

from nccl_workbook.examples import TRAIN_DDP
from tests._torchrun import marked_processes, run_torchrun, torchrun_job


def test_healthy_run_is_quick_and_clean(tmp_path) -> None:  # noqa: ANN001
    r = run_torchrun(TRAIN_DDP, "--steps", "20", "--out-dir", str(tmp_path), nproc=4, deadline_s=60)
    assert r.returncode == 0, r.output[-3000:]
    assert "done: 20 steps" in r.output and "val loss" in r.output
    assert (tmp_path / "ckpt.pt").exists()  # rank 0 saved a checkpoint
    # 10-15 s alone; 43 s beside a second test worker, 54.8 s beside two on a busy day (stop 33's CI): the bound
    # is the 60 s deadline the job is given, which it must meet without being stopped
    assert not r.timed_out and r.wall_s < 60


def test_the_script_imports_nothing_from_the_workbook() -> None:
    text = TRAIN_DDP.read_text()
    assert "nccl_workbook" not in text.replace("nccl_workbook/examples", "")


def test_raise_fails_the_job_naming_the_rank(tmp_path) -> None:  # noqa: ANN001
    r = run_torchrun(TRAIN_DDP, "--fault", "raise", "--fault-rank", "2", "--pg-timeout-s", "10",
                     "--out-dir", str(tmp_path), nproc=4, deadline_s=60)
    assert r.returncode != 0 and not r.timed_out
    assert "[rank2]: RuntimeError: planted fault: rank 2 failed at step 5" in r.output


def test_skip_step_hangs_the_others_until_the_group_timeout(tmp_path) -> None:  # noqa: ANN001
    r = run_torchrun(TRAIN_DDP, "--fault", "skip-step", "--fault-rank", "3", "--pg-timeout-s", "3",
                     "--out-dir", str(tmp_path), nproc=4, deadline_s=60)
    assert r.returncode != 0 and not r.timed_out
    assert "Timed out waiting 3000ms" in r.output
    assert "done:" not in r.output  # rank 0 never finishes its last step


def test_deadline_kills_a_hung_job_and_its_ranks(tmp_path) -> None:  # noqa: ANN001
    # 25 s: time for two ranks to start on a loaded 2-core machine (10 s ran out before both were up, stop 31)
    with torchrun_job(TRAIN_DDP, "--fault", "stall-data", "--stall-s", "120", "--out-dir", str(tmp_path),
                      nproc=2, deadline_s=25) as job:
        job.rank_pids(2)
        t0 = time.monotonic()
        r = job.wait()
        assert r.timed_out and time.monotonic() - t0 < 35
        time.sleep(0.5)
        assert marked_processes(job.job_id) == []  # torchrun stopped its ranks on the deadline's SIGTERM
