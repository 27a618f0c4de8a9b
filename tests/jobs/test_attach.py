"""``nccl-workbook attach`` on real torchrun jobs of the example script (4 ranks, gloo on CPU),
hung by a planted fault while attach runs. Other jobs may run on the same machine, so every
attach names its job by ``--pid``."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest

from nccl_workbook.attach import AttachError, attach
from nccl_workbook.attach.stacks import State
from nccl_workbook.examples import TRAIN_DDP
from tests._torchrun import torchrun_job

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; py-spy needs Linux here")

HUNG = ("--pg-timeout-s", "60", "--stall-s", "30")


def _line(text: str) -> str:
    """``train_ddp.py:N`` of the script's line that holds ``text``."""
    lines = TRAIN_DDP.read_text().splitlines()
    return f"train_ddp.py:{next(i for i, line in enumerate(lines, 1) if text in line)}"


BACKWARD = _line("loss.backward()")
READ = _line("time.sleep(self.stall_s)")
BARRIER = _line("dist.barrier()")


def _hung_job(tmp_path, *fault: str):  # noqa: ANN001, ANN202
    # deadlines that a busy machine (the suite runs on two workers) does not hit: only a failing run waits them out
    return torchrun_job(TRAIN_DDP, *fault, *HUNG, "--out-dir", str(tmp_path), nproc=4, deadline_s=120)


def _settle(job, wait: str, extra_s: float = 1.0) -> dict[int, int]:  # noqa: ANN001
    pids = job.rank_pids(4)
    job.wait_for(wait, timeout_s=90)
    time.sleep(extra_s)  # the others reach the next collective
    return pids


def test_stall_data_cli_names_rank_1_within_seconds(tmp_path) -> None:  # noqa: ANN001
    with _hung_job(tmp_path, "--fault", "stall-data", "--fault-rank", "1") as job:
        pids = _settle(job, "step 5:")
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "attach", "--pid", str(job.launcher_pid()),
                              "--json"], capture_output=True, text=True, timeout=60)
        took = time.perf_counter() - t0
        assert out.returncode == 0, out.stderr
        rep = json.loads(out.stdout)
        text = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "attach", "--pid", str(pids[2])],
                              capture_output=True, text=True, timeout=60)
        assert job.proc.poll() is None, "the job ended before attach finished: the test proves nothing"
    assert rep["culprit_ranks"] == [1], rep["message"]
    assert [r["pid"] for r in rep["ranks"]] == [pids[r] for r in range(4)]
    by_rank = {r["rank"]: r for r in rep["ranks"]}
    for r in (0, 2, 3):
        assert (by_rank[r]["state"], by_rank[r]["op"], by_rank[r]["frame"]) == ("collective", "ALLREDUCE", BACKWARD)
        assert by_rank[r]["stuck"] is True
    assert (by_rank[1]["state"], by_rank[1]["frame"]) == ("data", READ)
    assert rep["message"].startswith(f"ranks 0, 2, 3 in ALLREDUCE (DDP backward) at {BACKWARD}; rank 1 loading data")
    assert took < 8, f"attach took {took:.1f} s (process start with imports included)"
    assert rep["wall_s"] < 3
    assert text.returncode == 0 and text.stdout.splitlines()[0] == rep["message"]


def test_stall_data_with_dataloader_workers_native(tmp_path) -> None:  # noqa: ANN001
    with _hung_job(tmp_path, "--fault", "stall-data", "--fault-rank", "2", "--num-workers", "2") as job:
        pids = _settle(job, "step 5:", extra_s=2.0)
        # a DataLoader worker of rank 2 carries RANK=2 too: attach must take the rank, not it
        workers = psutil.Process(pids[2]).children()
        assert workers, "rank 2 has no DataLoader worker processes"
        rep = attach(workers[0].pid, native=True)
    assert [r.pid for r in rep.ranks] == [pids[r] for r in range(4)]
    assert rep.culprit_ranks == (2,), rep.message
    assert rep.ranks[2].place.state is State.DATA
    assert all("c10d::Reducer::finalize_backward" in rep.ranks[r].stack for r in (0, 1, 3))


def test_rank0_eval_names_rank_0(tmp_path) -> None:  # noqa: ANN001
    with _hung_job(tmp_path, "--fault", "rank0-eval", "--eval-interval", "5") as job:
        pids = _settle(job, "step 5:")
        rep = attach(pids[0])
    assert rep.culprit_ranks == (0,), rep.message
    assert rep.message.startswith(f"ranks 1-3 in ALLREDUCE (DDP backward) at {BACKWARD}; rank 0 ")
    assert "estimate_loss" in rep.message
    assert rep.ranks[0].stuck is False  # it computes


def test_skip_step_names_the_rank_that_ran_ahead(tmp_path) -> None:  # noqa: ANN001
    with _hung_job(tmp_path, "--fault", "skip-step", "--fault-rank", "3") as job:
        pids = _settle(job, "step 15:", extra_s=1.5)
        rep = attach(pids[3])
    assert rep.culprit_ranks == (3,), rep.message
    assert rep.message == f"ranks 0-2 in ALLREDUCE (DDP backward) at {BACKWARD}; rank 3 in BARRIER at {BARRIER}"


def test_healthy_job_has_no_odd_rank(tmp_path) -> None:  # noqa: ANN001
    with torchrun_job(TRAIN_DDP, "--steps", "100000", "--step-sleep-s", "0.01", "--log-interval", "50",
                      "--eval-interval", "100000", "--out-dir", str(tmp_path), nproc=4, deadline_s=120) as job:
        _settle(job, "step 50:", extra_s=0.2)
        reports = [attach(job.launcher_pid()) for _ in range(2)]   # twice: the answer holds from one look to the next
    for rep in reports:
        assert rep.culprit_ranks == (), rep.message
        assert rep.message.startswith("no rank is stuck in a collective: the job is making progress (just now: ")


def test_pid_of_no_job(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(AttachError, match=r"pid \d+ is not a rank, launcher or child of a job|no distributed job"):
        attach(psutil.Process().pid)
    out = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "attach", "--pid", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (1, 2) and out.stderr.startswith("nccl-workbook attach: ")
    assert "Traceback" not in out.stderr
