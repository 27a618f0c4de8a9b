"""``nccl-workbook watch`` around real torchrun jobs of the example training script (4 ranks, gloo):
the late rank named live for stalls (within 1.5 s of the wait beginning), the failing rank after the
end for failures, no report for a healthy job, bad input as one line, nothing left running."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from nccl_workbook.examples import train_ddp
from tests._torchrun import TorchrunJob, torchrun_command

TRAIN_DDP = Path(train_ddp.__file__)
LIVE_S = 1.5


def _watch(tmp_path: Path, *script_args: str, deadline_s: float = 90, extra: tuple[str, ...] = ()) -> tuple[dict, str, int]:
    """Run ``nccl-workbook watch --json`` around a 4-rank torchrun of the example script."""
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "nccl_workbook.cli", "watch", "--quiet", "--json", str(out), *extra, "--",
           *torchrun_command(TRAIN_DDP, "--out-dir", str(tmp_path / "ckpt"), *script_args, nproc=4)]
    job = TorchrunJob(cmd, deadline_s=deadline_s)
    try:
        result = job.wait(deadline_s + 15)
    finally:
        job.close()
    assert not result.timed_out, result.output[-3000:]
    return json.loads(out.read_text()), result.output, result.returncode


def test_healthy_job_gets_no_stall_report(tmp_path: Path) -> None:
    report, output, code = _watch(tmp_path, "--steps", "30")
    assert code == 0 and report["exit_code"] == 0, output[-2000:]
    assert report["world_size"] == 4 and report["stalls"] == [] and report["culprit_ranks"] == []
    assert [r["status"] for r in report["ranks"]] == ["ok"] * 4 and report["first_failure"] is None
    assert all(r["steps"] >= 29 for r in report["ranks"])  # steps marked at the optimizer without code changes


def test_rank0_evaluation_stall_is_named_live_and_resolves(tmp_path: Path) -> None:
    # nanoGPT's pattern: rank 0 evaluates for 4 s while the others wait in DDP's gradient all-reduce
    report, output, code = _watch(tmp_path, "--steps", "14", "--fault", "rank0-eval", "--stall-s", "4",
                                  "--eval-interval", "10", "--pg-timeout-s", "60")
    assert code == 0, output[-2000:]
    stall = report["stalls"][0]
    assert stall["culprit_ranks"] == [0] and stall["waiting_ranks"] == [1, 2, 3], stall
    assert stall["op"] == "ALLREDUCE" and stall["kind"] == "late" and stall["resolved"]
    assert stall["detected_after_s"] <= LIVE_S and 3.0 <= stall["wait_s"] <= 6.0
    assert set(stall["stacks"]) == {"0", "1", "2", "3"} and "train_ddp.py" in stall["stacks"]["0"]
    assert "stall: ranks 1, 2, 3 waited in ALLREDUCE" in output and "resolved: the wait lasted" in output


def test_stalled_data_read_on_rank_1_is_named_live(tmp_path: Path) -> None:
    report, output, _ = _watch(tmp_path, "--steps", "10", "--fault", "stall-data", "--fault-rank", "1",
                               "--stall-s", "3", "--pg-timeout-s", "60")
    stall = report["stalls"][0]
    assert stall["culprit_ranks"] == [1] and stall["detected_after_s"] <= LIVE_S, stall
    assert stall["resolved"] and report["exit_code"] == 0


def test_a_rank_raising_is_the_first_failure(tmp_path: Path) -> None:
    report, output, code = _watch(tmp_path, "--steps", "12", "--fault", "raise", "--fault-rank", "2",
                                  "--pg-timeout-s", "10")
    assert code != 0 and report["exit_code"] == code
    assert report["first_failure"]["rank"] == 2 and "planted fault" in report["first_failure"]["error"]
    assert report["culprit_ranks"] == [2]
    assert report["ranks"][2]["status"] == "error"
    assert {report["ranks"][r]["status"] for r in (0, 1, 3)} <= {"peer_closed", "killed", "timeout", "error"}


def test_a_rank_skipping_a_step_is_named_live_then_the_job_times_out(tmp_path: Path) -> None:
    report, output, code = _watch(tmp_path, "--steps", "10", "--fault", "skip-step", "--fault-rank", "3",
                                  "--pg-timeout-s", "4")
    assert code != 0
    live = [s for s in report["stalls"] if not s["resolved"]]
    # rank 3 is one collective ahead: at the others' gradient all-reduce it is in its next op already
    assert live and live[0]["culprit_ranks"] == [3] and live[0]["kind"] in ("missing", "mismatch"), report["stalls"]
    assert live[0]["detected_after_s"] <= LIVE_S
    assert report["culprit_ranks"] == [3]


def test_sigterm_to_watch_stops_the_job(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "nccl_workbook.cli", "watch", "--quiet", "--json", str(out), "--",
           *torchrun_command(TRAIN_DDP, "--steps", "10", "--fault", "stall-data", "--fault-rank", "1",
                             "--stall-s", "120", "--pg-timeout-s", "300", "--out-dir", str(tmp_path / "c"), nproc=4)]
    job = TorchrunJob(cmd, deadline_s=90)
    try:
        job.wait_for("stall:", timeout_s=60)
        watch_pid = job.launcher_pid()
        assert watch_pid is not None
        t0 = time.monotonic()
        import os

        os.kill(watch_pid, signal.SIGTERM)
        result = job.wait(40)
    finally:
        job.close()
    assert not result.timed_out and time.monotonic() - t0 < 30, result.output[-2000:]
    report = json.loads(out.read_text())
    assert report["stalls"][0]["culprit_ranks"] == [1] and not report["stalls"][0]["resolved"]
    assert {r["status"] for r in report["ranks"]} <= {"killed", "peer_closed", "error", "timeout"}


@pytest.mark.parametrize(("args", "message"), [
    ([], "no command to watch"),
    (["--", "no-such-launcher-xyz"], "command not found: no-such-launcher-xyz"),
    (["--hub-host", "no-such-host.invalid", "--", "true"], "does not resolve"),
    (["--hub-host", "192.0.2.1", "--", "true"], "cannot host the progress hub"),
])
def test_bad_input_is_one_line(args: list[str], message: str) -> None:
    import subprocess

    r = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "watch", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_fsdp2_and_checkpoint_collectives_are_seen(tmp_path: Path) -> None:
    """FSDP2's parameter all-gathers and gradient reduce-scatters and DCP's object collectives go
    through torch.distributed's Python functions, which the agent wraps."""
    import csv
    from collections import Counter

    script = Path(__file__).parent / "scripts" / "fsdp2_dcp.py"
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "nccl_workbook.cli", "watch", "--quiet", "--out", str(out), "--",
           *torchrun_command(script, str(tmp_path / "ckpt"), nproc=2)]
    job = TorchrunJob(cmd, deadline_s=90)
    try:
        result = job.wait(100)
    finally:
        job.close()
    assert result.returncode == 0, result.output[-2000:]
    rows = list(csv.DictReader((out / "trace.csv").open()))
    ops = Counter(r["name"] for r in rows if r["kind"] == "collective" and r["rank"] == "0")
    assert ops["_ALLGATHER_BASE"] >= 6 and ops["_REDUCE_SCATTER_BASE"] >= 3, ops  # 3 steps of 2 layers + root
    assert ops["GATHER"] + ops["ALLGATHER"] + ops["BROADCAST"] >= 2, ops  # the checkpoint's planning
    assert json.loads((out / "report.json").read_text())["ranks"][0]["steps"] == 3
    for name in ("trace.perfetto.json", "timeline.png", "times.png", "report.txt"):
        assert (out / name).stat().st_size > 0
