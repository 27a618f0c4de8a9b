"""Job-level reading and ranked causes: who reported, who is missing or behind, which scenario.

Logs come from three places: torch 2.13 gloo runs recorded in tests/data/logs/torch213 (real
output of this machine's torch), the bundled example, and small synthetic logs built with the
factories below in the exact formats the real examples show.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_workbook.triage import (
    Confidence,
    EventKind,
    LogRankState,
    example_log_text,
    notebook_for,
    parse_log,
    scenario_notebooks,
    summarize,
    triage_log,
)
from nccl_workbook.triage.findings import NAMED_SCENARIOS

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"


def body(path: Path) -> bytes:
    return path.read_bytes().partition(b"\n")[2]


# --- factories (formats copied from the real examples) -----------------------------------------


def watchdog(rank: int, seq: int, op: str = "ALLREDUCE", numel: int = 1, timeout_ms: int = 600000, pg: int = 0) -> str:
    return (f"[rank{rank}]:[E1121 10:10:01.{100000000 + rank} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn={numel}, NumelOut={numel}, "
            f"Timeout(ms)={timeout_ms}) ran for {timeout_ms + 17} milliseconds before timing out.")


def status(rank: int, seq: int, enqueued: int, completed: int, pg: int = 0) -> str:
    return (f"[rank{rank}]:[E1121 10:10:01.{200000000 + rank} ProcessGroupNCCL.cpp:2271] [PG ID {pg} PG GUID {pg}"
            f"(default_pg) Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: "
            f"last enqueued work: {enqueued}, last completed work: {completed}")


def job(*lines: str) -> str:
    return "\n".join(("Epoch 3:  41%|####      | 410/1000 [06:28<09:20,  1.05it/s]",) + lines) + "\n"


# --- the scenarios ---------------------------------------------------------------------------


def test_scenario_notebooks_come_from_the_registry():
    from nccl_workbook.scenarios import SCENARIOS

    assert notebook_for("rank0-work-before-barrier") == "01_rank0_work_before_barrier.ipynb"  # as written
    assert scenario_notebooks() == {sid: s.notebook for sid, s in SCENARIOS.items()}
    assert notebook_for("timeout-settings") == "10_timeout_settings.ipynb"
    with pytest.raises(KeyError, match="Unknown scenario 'nope'; known: rank0-work-before-barrier"):
        notebook_for("nope")


def test_every_scenario_triage_can_name_is_registered_with_its_notebook():
    from nccl_workbook.scenarios import SCENARIOS

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    assert NAMED_SCENARIOS and NAMED_SCENARIOS <= set(SCENARIOS), NAMED_SCENARIOS - set(SCENARIOS)
    for sid in NAMED_SCENARIOS:
        assert (notebooks / notebook_for(sid)).exists(), sid


def test_a_scenario_registered_later_is_found(monkeypatch):
    from dataclasses import replace

    from nccl_workbook import scenarios
    from nccl_workbook.triage.findings import Finding

    extra = replace(scenarios.SCENARIOS["fd-exhaustion"], id="late-registered", notebook="99_late_registered.ipynb")
    monkeypatch.setitem(scenarios.SCENARIOS, "late-registered", extra)
    assert notebook_for("late-registered") == "99_late_registered.ipynb"
    finding = Finding(title="t", scenario="late-registered", reason="r", fix="f", score=0.5)
    assert finding.notebook_path == "notebooks/99_late_registered.ipynb"


def test_findings_name_only_their_rules_scenarios():
    from nccl_workbook.triage.findings import RULES, Evidence

    logs = [example_log_text()] + [body(p).decode("utf-8", "replace") for p in sorted((DATA / "real").glob("*.log"))]
    for text in logs:
        events = parse_log(text)
        evidence = Evidence.of(events, summarize(events))
        found: tuple = ()
        for rule in RULES:
            new = tuple(rule.find(evidence, found))
            assert all(f.scenario in rule.scenarios for f in new), (rule.name, [f.scenario for f in new])
            found += new


def test_bundled_example_names_rank_0_and_the_allreduce():
    report = triage_log(example_log_text())
    s = report.summary
    assert s.ranks_reported == (1, 2, 3)
    assert s.ranks_missing == (0,) and s.world_size == 4
    assert s.ranks_behind == (0,) and "never enqueued work 6764" in s.behind_reason
    assert (s.failed_op, s.failed_seq, s.failed_numel, s.timeout_ms) == ("ALLREDUCE", 6764, 1, 600000)
    assert s.first_detectors == (1,)
    assert s.earliest is not None and (s.earliest.rank, s.earliest.kind) == (1, EventKind.COLLECTIVE_TIMEOUT)
    rows = {r.rank: r for r in s.per_rank}
    assert rows[0].status is LogRankState.BEHIND and (rows[0].last_enqueued, rows[0].last_completed) == (6763, 6763)
    assert rows[2].status is LogRankState.TIMEOUT and (rows[2].last_enqueued, rows[2].last_completed) == (6764, 6763)
    top = report.top
    assert top.scenario == "rank0-work-before-barrier" and top.culprit_ranks == (0,)
    assert top.notebook_path == "notebooks/01_rank0_work_before_barrier.ipynb"
    assert report.findings[1].scenario == "slow-metrics-on-rank0"
    assert "NumelIn=1 cannot tell a barrier from a scalar" in top.reason


def test_torch213_gloo_rank0_late_at_barrier():
    report = triage_log(body(DATA / "torch213" / "gloo_rank0_work_before_barrier.log"))
    s = report.summary
    assert (s.ranks_reported, s.ranks_missing, s.world_size_basis, s.failed_op) == ((1,), (0,), "launcher", "BARRIER")
    assert report.top.scenario == "rank0-work-before-barrier" and report.top.culprit_ranks == (0,)
    assert report.top.confidence is Confidence.MEDIUM


def test_torch213_gloo_exception_on_one_rank():
    report = triage_log(body(DATA / "torch213" / "gloo_exception_on_one_rank.log"))
    rows = {r.rank: r for r in report.summary.per_rank}
    assert rows[1].status is LogRankState.ERROR and rows[1].detail == "ValueError: bad sample in batch 17"
    assert rows[0].status is LogRankState.PEER_CLOSED and rows[0].op_type == "ALLREDUCE"
    top = report.top
    assert (top.scenario, top.culprit_ranks, top.confidence) == ("exception-on-one-rank", (1,), Confidence.HIGH)


def test_torch213_monitored_barrier_names_the_late_rank():
    report = triage_log(body(DATA / "torch213" / "gloo_monitored_barrier.log"))
    assert report.summary.named_late == (1,)
    assert report.top.culprit_ranks == (1,) and report.top.confidence is Confidence.HIGH


def test_torch213_detail_mismatch_two_sides_cannot_pick_one():
    report = triage_log(body(DATA / "torch213" / "gloo_detail_shape_mismatch.log"))
    top = report.top
    assert top.scenario == "collective-mismatch" and top.culprit_ranks == (0, 1)
    assert "cannot tell which one is wrong" in top.reason


def test_torch213_store_and_dataloader():
    store = triage_log(body(DATA / "torch213" / "store_waiting_for_clients.log"))
    assert store.top.scenario == "init-rendezvous-timeout" and "1 of 2 ranks never connected" in store.top.reason
    assert store.summary.world_size == 2 and store.summary.world_size_basis == "stated"
    dl = triage_log(body(DATA / "torch213" / "dataloader_timeout.log"))
    assert dl.top.scenario == "dataloader-stall"


def test_silent_rank_in_allgather_points_to_uneven_eval():
    log = job(
        watchdog(1, 40, "ALLGATHER", 1000),
        watchdog(2, 40, "ALLGATHER", 1000),
        watchdog(3, 40, "ALLGATHER", 1000),
        status(0, 39, 39, 39),
    )
    report = triage_log(log)
    assert report.summary.ranks_behind == (0,)
    uneven = next(f for f in report.findings if f.scenario == "uneven-eval-allgather")
    assert uneven.culprit_ranks == (0,)
    assert report.top.scenario == "uneven-eval-allgather"


def test_allgather_with_different_sizes_is_stronger_evidence():
    log = job(watchdog(0, 12, "ALLGATHER", 512), watchdog(1, 12, "ALLGATHER", 640), watchdog(2, 12, "ALLGATHER", 512))
    report = triage_log(log + watchdog(3, 11, "BROADCAST", 4) + "\n")
    uneven = next(f for f in report.findings if f.scenario == "uneven-eval-allgather")
    assert uneven.confidence is Confidence.MEDIUM and "512, 640" in uneven.reason
    assert report.summary.ranks_behind == (3,)  # timed out at a lower SeqNum


def test_one_silent_rank_in_gradient_allreduce_is_a_slow_rank():
    log = job(*(watchdog(r, 500, "ALLREDUCE", 25_000_000) for r in (0, 1, 3)))
    report = triage_log(log)
    assert report.summary.ranks_missing == (2,)
    assert report.top.scenario == "slow-rank-dynamic-shapes" and report.top.culprit_ranks == (2,)


def test_everyone_waiting_in_the_same_collective_cannot_decide():
    lines = [watchdog(r, 77, "ALLREDUCE", 2048) for r in range(4)] + [status(r, 77, 77, 76) for r in range(4)]
    report = triage_log(job(*lines))
    assert report.summary.ranks_missing == () and report.summary.ranks_behind == ()
    assert report.top.scenario is None and report.top.title == "The log cannot decide"
    assert "cannot decide which rank was late" in report.top.reason


def test_exception_on_one_rank_before_nccl_timeouts():
    log = job(
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "train.py", line 88, in <module>',
        "[rank2]: KeyError: 'label'",
        *(watchdog(r, 9, "ALLREDUCE", 4096) for r in (0, 1, 3)),
    )
    report = triage_log(log)
    top = report.top
    assert (top.scenario, top.culprit_ranks, top.confidence) == ("exception-on-one-rank", (2,), Confidence.HIGH)
    assert "KeyError: 'label'" in top.reason


def test_dataloader_worker_death_on_one_rank():
    log = job(
        "[rank3]: RuntimeError: DataLoader worker (pid 51234) is killed by signal: Killed.",
        *(watchdog(r, 120, "ALLREDUCE", 1) for r in (0, 1, 2)),
    )
    report = triage_log(log)
    top = report.top
    assert (top.scenario, top.culprit_ranks) == ("dataloader-stall", (3,))
    assert "out-of-memory killer" in top.reason and top.confidence is Confidence.HIGH


def test_too_many_open_files_on_one_rank():
    log = job(
        "[rank1]: RuntimeError: Too many open files. Communication with the workers is no longer possible. Please "
        "increase the limit using `ulimit -n` in the shell or change the sharing strategy by calling "
        "`torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code",
        *(watchdog(r, 31, "BARRIER", 1) for r in (0, 2, 3)),
    )
    report = triage_log(log)
    assert (report.top.scenario, report.top.culprit_ranks) == ("fd-exhaustion", (1,))


def test_unused_parameters_error():
    log = job(
        "[rank0]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
        "This error indicates that your module has parameters that were not used in producing loss.",
        "[rank0]: Parameter indices which did not receive grad for rank 0: 14 15",
    )
    report = triage_log(log)
    assert report.top.scenario == "unused-parameters" and report.top.culprit_ranks == (0,)


def test_ranks_in_different_ops_at_the_same_seq_is_a_mismatch():
    report = triage_log(job(watchdog(0, 50, "ALLREDUCE", 8), watchdog(1, 50, "BROADCAST", 8)))
    assert any(f.scenario == "collective-mismatch" for f in report.findings)


def test_timeout_settings_findings():
    log = job(
        "RuntimeError: DataLoader timed out after 900 seconds",
        watchdog(1, 3, "ALLREDUCE", 1, timeout_ms=600000),
    )
    report = triage_log(log)
    settings = [f for f in report.findings if f.scenario == "timeout-settings"]
    assert any("not below the process-group timeout" in f.title for f in settings)
    stuck = triage_log(job("[rank6]:[E429 13:55:49.3 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) "
                           "Rank 6] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress"))
    assert stuck.top.scenario == "timeout-settings" and stuck.top.culprit_ranks == (6,)


def test_duplicate_gpu_and_store_have_no_scenario_but_a_fix():
    report = triage_log(body(DATA / "real" / "horovod_3929_mpirun_duplicate_gpu.log"))
    assert report.top.scenario is None and report.top.culprit_ranks == (0, 1, 2, 4)
    assert "set_device(local_rank)" in report.top.fix
    store = triage_log(body(DATA / "real" / "visualrft_123_store_clients.log"))
    assert store.top.title == "A rank never joined the rendezvous" and "2 of 3 ranks" in store.top.reason


def test_real_multi_rank_excerpts():
    # ranks 1-6 report BROADCAST SeqNum 4; rank 0 (vLLM generation in that job) does not
    report = triage_log(body(DATA / "real" / "openr1_620_wrapped_optype_rank0_missing.log"))
    s = report.summary
    assert s.ranks_reported == (1, 2, 3, 5, 6) and 0 in s.ranks_missing
    assert s.world_size_basis == "highest rank + 1" and (s.failed_op, s.failed_seq) == ("BROADCAST", 4)
    assert 0 in report.top.culprit_ranks
    # rank 7 timed out at SeqNum 64088 while rank 0 was past 96000: rank 7 issued fewer collectives
    progress = triage_log(body(DATA / "real" / "pytorch_118369_progress_bar.log"))
    assert progress.summary.ranks_behind == (7,)
    assert any(f.title == "The timeout fired long after it expired" for f in progress.findings)


def test_empty_and_garbage_logs_say_so():
    for data in (b"", b"\x00\xff\xfe garbage", "just a normal line\n" * 3):
        report = triage_log(data)
        assert report.events == () and len(report.findings) == 1
        assert report.top.scenario is None and "No known failure message" in report.top.reason


def test_summary_json_has_the_contract_fields():
    s = summarize(parse_log(example_log_text())).to_json()
    for key in ("ranks_reported", "ranks_missing", "earliest_failure", "per_rank", "failed_op"):
        assert key in s
    assert s["earliest_failure"]["rank"] == 1 and s["per_rank"][0]["last_enqueued"] == 6763
