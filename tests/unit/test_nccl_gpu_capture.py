"""The GPU watchdog tests (``tests/gpu/test_nccl_watchdog.py``) on the capture kept from a real GPU run
(``tests/data/logs/nccl_gpu``: one NVIDIA H200, torch 2.11.0+cu130, NCCL 2.28.9), so that machines
without a GPU check the real logs and dumps too. The test functions are the GPU file's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gpu.test_nccl_watchdog import (  # noqa: F401 - collected here, on the kept capture
    test_blocking_wait_keeps_the_process_and_it_exits,
    test_blocking_wait_raises_in_the_calling_thread,
    test_by_default_the_process_ends_a_minute_after_the_timeout,
    test_tear_down_modes_kill_the_process,
    test_the_dump_on_timeout_is_read_by_the_workbook_and_by_torch,
    test_the_watchdog_names_the_overdue_allreduce,
    test_triage_reads_each_real_log,
    test_without_tear_down_the_script_runs_on_but_the_process_hangs_at_exit,
)

KEPT = Path(__file__).resolve().parents[1] / "data" / "logs" / "nccl_gpu"


@pytest.fixture(scope="module")
def runs() -> tuple[Path, dict[str, dict]]:
    summary = json.loads((KEPT / "summary.json").read_text())
    return KEPT, summary["runs"]


def test_the_kept_capture_is_what_it_says() -> None:
    meta = json.loads((KEPT / "summary.json").read_text())["meta"]
    assert meta["gpu"] == "NVIDIA H200" and meta["torch"].startswith("2.11") and meta["nccl"] == "2.28.9"


@pytest.mark.parametrize("mode", ["default", "aeh0", "aeh1", "aeh2", "aeh3", "aeh3_timing", "aeh3_nodump"])
def test_triage_reads_every_field_of_the_real_watchdog_lines(mode: str) -> None:
    from nccl_workbook.triage import parse_log

    events = parse_log((KEPT / f"{mode}.log").read_text())
    first = next(e for e in events if e.kind.value == "collective_timeout")
    assert (first.rank, first.op_type, first.seq_num, first.numel_in, first.timeout_ms, first.detail) == (
        0, "ALLREDUCE", 6, 1_048_576, 2000, "watchdog")
    assert 2000 <= first.ran_for_ms < 2200
    status = next(e for e in events if e.kind.value == "pg_status")
    assert (status.pg_name, status.last_enqueued, status.last_completed) == ("default_pg", 6, 5)


@pytest.mark.parametrize("mode", ["blocking_aeh2", "blocking_aeh3"])
def test_triage_reads_the_real_blocking_wait_line(mode: str) -> None:
    from nccl_workbook.triage import parse_log

    events = [e for e in parse_log((KEPT / f"{mode}.log").read_text()) if e.kind.value == "collective_timeout"]
    assert {e.detail for e in events} >= {"watchdog", "blocking wait"}
    assert all((e.op_type, e.seq_num) == ("ALLREDUCE", 6) for e in events)
