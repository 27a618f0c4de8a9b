"""ProcessGroupNCCL's watchdog for real, on one GPU: what each ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` value
and ``TORCH_NCCL_BLOCKING_WAIT`` do to a process whose all-reduce times out, the exact lines it
prints, and its dump-on-timeout read by the workbook and by torch's own analyzer.

``capture.py`` runs one 1-rank process per setting (all at once); ``$NWB_GPU_CAPTURE`` names a folder
to keep its logs and dumps in. One such capture (H200, torch 2.11) is kept in
``tests/data/logs/nccl_gpu``, and ``tests/unit/test_nccl_gpu_capture.py`` runs these same tests on it
where there is no GPU.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from nccl_workbook.flight import analyze_dumps, load_dumps, run_torch_analyzer
from nccl_workbook.triage import triage_log
from tests.gpu.capture import SLEEP_S, TIMEOUT_S, capture

WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=ALLREDUCE\b.*?"
                      r"Timeout\(ms\)=(\d+)\)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    out = Path(os.environ.get("NWB_GPU_CAPTURE") or tmp_path_factory.mktemp("nccl"))
    return out, capture(out)


def _log(out: Path, mode: str) -> str:
    return (out / f"{mode}.log").read_text()


@pytest.mark.parametrize("mode", ["default", "aeh3_nodump", "aeh0", "aeh1", "aeh2", "aeh3", "aeh3_timing"])
def test_the_watchdog_names_the_overdue_allreduce(runs: tuple[Path, dict], mode: str) -> None:
    out, _ = runs
    m = WATCHDOG.search(_log(out, mode))
    assert m, _log(out, mode)[-3000:]
    assert int(m.group(2)) == int(TIMEOUT_S * 1000)


@pytest.mark.parametrize("mode", ["default", "aeh3_nodump"])
def test_by_default_the_process_ends_a_minute_after_the_timeout(runs: tuple[Path, dict], mode: str) -> None:
    """Out of the box (ASYNC_ERROR_HANDLING=3) the watchdog logs the timeout after 2 s, then sleeps
    4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC (15 s) before it ends the process (SIGABRT)."""
    _, res = runs
    r = res[mode]
    assert r["rc"] is not None and r["rc"] < 0, r
    assert 50 < r["ended_after_s"] < 100, r


@pytest.mark.parametrize("mode", ["aeh1", "aeh3", "aeh3_timing"])
def test_tear_down_modes_kill_the_process(runs: tuple[Path, dict], mode: str) -> None:
    """1 (TearDown) and 3 (SkipCleanUp) end the process from the watchdog thread: the training loop
    gets no exception to handle. With a 1 s dump wait, 4 s after the 2 s timeout."""
    _, res = runs
    r = res[mode]
    assert r["rc"] is not None and r["rc"] < 0, r
    assert TIMEOUT_S < r["ended_after_s"] < 30 and "exit" not in r["marks"], r


@pytest.mark.parametrize("mode", ["aeh0", "aeh2"])
def test_without_tear_down_the_script_runs_on_but_the_process_hangs_at_exit(runs: tuple[Path, dict], mode: str) -> None:
    """0 (NoHandling) and 2 (CleanUpOnly) keep the process: the script runs to its end (with 2 the next
    collective raises 'NCCL communicator was aborted'), and then the interpreter does not exit
    (killed by the capture's deadline, a minute later)."""
    _, res = runs
    r = res[mode]
    assert "exit" in r["marks"] and r["rc"] is None, r
    nxt = "next_collective_raised" if mode == "aeh2" else "next_collective_ok"
    assert nxt in r["marks"], r
    if mode == "aeh2":
        assert "communicator was aborted" in r["marks"][nxt][1]


@pytest.mark.parametrize("mode", ["blocking_aeh2", "blocking_aeh3"])
def test_blocking_wait_keeps_the_process_and_it_exits(runs: tuple[Path, dict], mode: str) -> None:
    """With blocking wait, also under 3, the process is not torn down: the script handles the error."""
    _, res = runs
    r = res[mode]
    assert r["rc"] == 0 and "exit" in r["marks"], r
    assert "failure detected by watchdog" not in _log(runs[0], mode)  # the watchdog left it to wait()


@pytest.mark.parametrize("mode", ["blocking_aeh2", "blocking_aeh3"])
def test_blocking_wait_raises_in_the_calling_thread(runs: tuple[Path, dict], mode: str) -> None:
    """The exception carries the watchdog's own text. Measured: it is raised once the kernel the
    all-reduce waited behind has ended (6 s), not at the 2 s timeout."""
    _, res = runs
    r = res[mode]
    t, detail = r["marks"]["wait_raised"]
    assert TIMEOUT_S * 0.9 <= t < SLEEP_S + 2, r
    assert "Watchdog caught collective operation timeout" in detail and "OpType=ALLREDUCE" in detail, detail
    assert "aborted" in r["marks"]["next_collective_raised"][1]


def test_the_dump_on_timeout_is_read_by_the_workbook_and_by_torch(runs: tuple[Path, dict]) -> None:
    out, res = runs
    for mode in ("aeh3", "aeh3_timing"):
        assert "nccl_trace_rank_0" in res[mode]["files"], res[mode]
        dumps = load_dumps(out / mode, prefix="nccl_trace_rank_")
        entries = dumps.by_rank[0].entries
        names = [e.profiling_name for e in entries]
        assert names[-1] == "nccl:all_reduce" and len(entries) >= 6, names
        assert all(e.state.value == "completed" for e in entries[:-1]), [e.state for e in entries]
        assert entries[-1].state.value != "completed"
        timed = [e.duration_ms for e in entries[:-1]]
        if mode == "aeh3_timing":
            assert all(d is not None and d >= 0 for d in timed), timed
        report = analyze_dumps(dumps)
        assert report.diagnosis.failed_op == "ALLREDUCE", report.render()
        verdict = run_torch_analyzer(out / mode)
        assert verdict.status.value not in ("crashed", "timed_out"), verdict


def test_triage_reads_each_real_log(runs: tuple[Path, dict]) -> None:
    out, _ = runs
    for mode in ("default", "aeh3", "blocking_aeh2"):
        report = triage_log(_log(out, mode))
        text = report.render()
        assert "ALLREDUCE" in text and "timeout" in text.lower(), text
