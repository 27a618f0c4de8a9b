"""Fixes and pure parts of the slow-metrics-on-rank0, exception-on-one-rank and dataloader-stall
scenarios, on CPU, without a cluster (1-rank gloo groups on an in-memory store where a group is
needed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from nccl_workbook import fixes, plots
from nccl_workbook.fixes.failfast import FailFast, FailureRecord, PeerFailedError
from nccl_workbook.results import Outcome, RankOutcome, RankStatus, RunResult
from nccl_workbook.scenarios import SCENARIOS, _common
from nccl_workbook.scenarios import dataloader_stall as dls
from nccl_workbook.scenarios import exception_on_one_rank as exc
from nccl_workbook.scenarios import slow_metrics_on_rank0 as sm
from nccl_workbook.trace import TraceRow, trace_frame

from .factories import S, coll, frame, step


@pytest.fixture
def one_rank_group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_registered() -> None:
    for sid in ("slow-metrics-on-rank0", "exception-on-one-rank", "dataloader-stall"):
        s = SCENARIOS[sid]
        assert s.expected_op == "ALLREDUCE" and s.notebook.startswith(("02_", "03_", "04_"))
    assert {"FailFast", "PeerFailedError", "BackgroundLogger", "total_norms", "loader_timeout_for"} <= set(fixes.__all__)


# -- metrics --------------------------------------------------------------------------------------
def _model_with_grads() -> torch.nn.Module:
    m = sm.make_model(dim=16, blocks=2)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1))
    (m(x) - x).pow(2).mean().backward()
    return m


def test_three_norm_methods_agree_and_total_norms_uses_the_clip_value() -> None:
    m = _model_with_grads()
    params = list(m.parameters())
    values = [fn(params) for fn in sm.NORM_METHODS.values()]
    for g, p in values:
        assert g == pytest.approx(values[0][0], rel=1e-5) and p == pytest.approx(values[0][1], rel=1e-5)
    clipped = torch.nn.utils.clip_grad_norm_(params, max_norm=1e9)
    g, p = fixes.total_norms(params, grad_norm=clipped)
    assert g is clipped and float(p) == pytest.approx(values[0][1], rel=1e-5)
    assert [float(t) for t in fixes.total_norms([])] == [0.0, 0.0]


def test_compare_norm_methods_measures_work_and_memory() -> None:
    df = sm.compare_norm_methods(repeats=3)
    assert list(df.index) == ["stacked", "cpu-loop", "fused"]
    assert df.loc["fused", "kernels"] < df.loc["stacked", "kernels"] < df.loc["cpu-loop", "kernels"]
    params = list(sm.make_model().parameters())
    model_bytes = sum(p.numel() * 4 for p in params)
    # the seed's loop squares a full copy of every gradient and parameter
    assert df.loc["cpu-loop", "bytes_allocated"] >= 2 * model_bytes > 1000 * df.loc["stacked", "bytes_allocated"]
    assert df.loc["cpu-loop", "gpu_host_copies"] == 2 * len(params) and df.loc["fused", "gpu_host_copies"] == 2
    assert df["grad_norm"].nunique() == 1 and (df["us_per_call"] > 0).all()
    assert torch.get_num_threads() >= 1


def test_background_logger_never_blocks_and_keeps_order() -> None:
    written: list[int] = []
    flushes: list[int] = []

    def slow_write(record: dict) -> None:
        time.sleep(0.05)
        written.append(record["i"])

    logger = fixes.BackgroundLogger(slow_write, flush=lambda: flushes.append(len(written)), flush_every=3)
    t0 = time.perf_counter()
    for i in range(6):
        assert logger.log({"i": i})
    # six writes of 50 ms each (0.3 s) did not block the caller; the margin is for a busy machine (two test workers)
    assert time.perf_counter() - t0 < 0.15
    assert logger.close(timeout_s=5)
    assert written == list(range(6)) and flushes == [3, 6] and logger.busy_s >= 0.3
    assert not logger.log({"i": 99}) and logger.dropped == 1


def test_background_logger_drops_when_full_and_survives_sink_errors() -> None:
    gate = threading.Event()

    def write(record: dict) -> None:
        gate.wait(2)
        if record["i"] == 0:
            raise OSError("tracker unreachable")

    with fixes.BackgroundLogger(write, max_pending=2) as logger:
        results = [logger.log({"i": i}) for i in range(6)]
        gate.set()
    assert results[:2] == [True, True] and not all(results) and logger.dropped >= 1
    assert logger.errors == ["OSError: tracker unreachable"]
    with pytest.raises(ValueError, match="flush_every needs a flush function"):
        fixes.BackgroundLogger(print, flush_every=2)


def test_tracker_client_offline_writes_a_local_file() -> None:
    t = sm.TrackerClient(sm.Params(log_call_s=0.0), offline=True)
    t.write({"step": 0})
    t.flush()
    with open(t.path, encoding="utf-8") as f:
        assert f.read() == '{"step": 0}\n'
    t.close()
    t.close()  # idempotent


def test_slow_metrics_params_are_checked() -> None:
    with pytest.raises(ValueError, match="norms must be one of"):
        sm.Params(norms="fast")
    with pytest.raises(ValueError, match="logger must be one of"):
        sm.Params(logger="print")
    s = SCENARIOS["slow-metrics-on-rank0"]
    assert s.params_for("background-logging").logger == "background"
    assert s.params_for("seed-fix").norms == "cpu-loop"


def _wait_rows() -> list[TraceRow]:
    rows = []
    for i in range(3):
        rows += [TraceRow(rank=r, kind="step", name="step", step=i, t_enqueue_ns=int(i * S), t_start_ns=int(i * S),
                          t_end_ns=int((i + 0.5) * S), status="ok")
                 for r in range(2)]
        rows += [TraceRow(rank=0, kind="collective", name="ALLREDUCE", pg="0", seq=i + 1, step=i, numel=8, nbytes=32,
                          t_enqueue_ns=int((i + 0.3) * S), t_start_ns=int((i + 0.3) * S), t_end_ns=int((i + 0.31) * S),
                          status="ok"),
                 TraceRow(rank=1, kind="collective", name="ALLREDUCE", pg="0", seq=i + 1, step=i, numel=8, nbytes=32,
                          t_enqueue_ns=int((i + 0.1) * S), t_start_ns=int((i + 0.1) * S), t_end_ns=int((i + 0.31) * S),
                          status="ok" if i < 2 else "timeout")]
    return rows


def test_wait_per_step_plot() -> None:
    df = frame(_wait_rows()).assign(variant="broken")
    fig = plots.wait_per_step(df, title="t")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "training step" and ax.get_ylabel() == "in collectives (ms)"
    assert ax.get_yscale() == "log" and ax.get_title(loc="left") == "broken"
    # the legend sits below the panels (never over the data), with the failed-step marker explained
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["rank 0", "rank 1"]
    with pytest.raises(ValueError, match="no collectives inside training steps"):
        plots.wait_per_step(frame([coll(0, 1, 0.0, 1.0)]))


# -- fail fast ------------------------------------------------------------------------------------
def test_failure_record_round_trip_and_text() -> None:
    rec = FailureRecord.of(2, ValueError("corrupt sample 17\nsecond line"))
    assert rec.describe() == "rank 2 raised ValueError: corrupt sample 17"
    assert FailureRecord.from_json(rec.to_json()) == rec
    err = PeerFailedError(rec, this_rank=0)
    assert "stopping rank 0: rank 2 raised ValueError: corrupt sample 17" == str(err) and err.record is rec


def test_failfast_success_is_silent(one_rank_group: None) -> None:
    with FailFast(poll_s=0.01) as guard:
        dist.barrier()
    assert guard.failure is None and dist.is_initialized()


def test_failfast_publishes_and_leaves_the_group(one_rank_group: None) -> None:
    store = c10d._get_default_store()
    with pytest.raises(ValueError, match="corrupt"):
        with FailFast(poll_s=0.01, name="run1") as guard:
            raise ValueError("corrupt sample 3")
    assert guard.failure is not None and guard.failure.rank == 0 and guard.failure.exc_type == "ValueError"
    assert FailureRecord.from_json(store.get("nccl_workbook/failfast/run1")).message == "corrupt sample 3"
    assert not dist.is_initialized()  # gloo: the group was destroyed, which frees the peers


def test_failfast_turns_a_peers_failure_into_peer_failed_error(one_rank_group: None) -> None:
    store = c10d._get_default_store()
    other = FailureRecord(1, "ValueError", "corrupt sample 9", time.time_ns())
    with pytest.raises(PeerFailedError, match="rank 1 raised ValueError: corrupt sample 9") as info:
        with FailFast(poll_s=0.01) as guard:
            store.set("nccl_workbook/failfast/train", other.to_json())
            deadline = time.monotonic() + 2
            while guard.peer_failure is None and time.monotonic() < deadline:
                time.sleep(0.01)
            guard.check()
    assert info.value.record == other and guard.failure == other
    assert store.add("nccl_workbook/failfast/train/acks", 0) == 1  # the watcher acknowledged it once
    assert dist.is_initialized()  # a rank that did not fail leaves the teardown to the launcher


def test_failfast_after_a_peer_failed_even_if_this_rank_finished(one_rank_group: None) -> None:
    store = c10d._get_default_store()
    store.set("nccl_workbook/failfast/train", FailureRecord(3, "RuntimeError", "DataLoader timed out", 1).to_json())
    with pytest.raises(PeerFailedError, match="rank 3 raised RuntimeError"):
        with FailFast(poll_s=0.5):
            pass


def test_failfast_needs_a_group_and_sane_settings() -> None:
    with pytest.raises(RuntimeError, match="init_process_group"):
        with FailFast():
            pass
    with pytest.raises(ValueError):
        FailFast(poll_s=0)
    with pytest.raises(ValueError, match="without '/'"):
        FailFast(name="a/b")


def test_stay_like_nccl_waits_out_the_peers_timeout() -> None:
    t0 = time.time_ns()
    stayed = _common.stay_like_nccl(0.1, t0, margin_s=0.05)
    assert 0.1 <= (time.time_ns() - t0) / 1e9 < 0.5 and stayed > 0
    assert _common.stay_like_nccl(0.1, t0 - 10 * S) == 0.0


# -- exception-on-one-rank --------------------------------------------------------------------------
def test_corrupt_sample_raises_a_value_error_naming_it() -> None:
    good = exc.decode_sample(5, exc.encoded_sample(5, 8))
    assert good.shape == (8,)
    with pytest.raises(ValueError, match="cannot decode sample 5: buffer length"):
        exc.decode_sample(5, exc.encoded_sample(5, 8, corrupt=True))
    with pytest.raises(ValueError, match="ending must be one of"):
        exc.Params(ending="retry")
    with pytest.raises(ValueError, match="fail_step"):
        exc.Params(fail_step=6)


def _result(rows: list[TraceRow], per_rank: list[RankOutcome], metrics: dict | None = None) -> RunResult:
    return RunResult("exception-on-one-rank", "x", "gloo", len(per_rank), 3.0, Outcome.from_statuses([r.status for r in per_rank]),
                     (), (), None, None, tuple(per_rank), 1.0, trace=trace_frame(rows), metrics=metrics or {})


def test_stop_frame_measures_time_to_detection() -> None:
    rows = [step(r, 0, 0.0, 0.1) for r in range(3)]
    rows += [TraceRow(rank=2, kind="region", name="load_batch", step=1, t_enqueue_ns=int(0.1 * S), t_start_ns=int(0.1 * S),
                      t_end_ns=int(0.2 * S), status="error"),
             step(2, 1, 0.1, 0.2, "error"), step(0, 1, 0.1, 3.2, "timeout"), step(1, 1, 0.1, 3.3, "timeout")]
    per = [RankOutcome(0, RankStatus.TIMEOUT, "RuntimeError: Timed out waiting 3000ms"),
           RankOutcome(1, RankStatus.TIMEOUT, "RuntimeError: Timed out waiting 3000ms"),
           RankOutcome(2, RankStatus.ERROR, "ValueError: cannot decode sample 7")]
    df = exc.stop_frame(_result(rows, per))
    assert list(df["stopped_after_s"]) == [3.0, 3.1, 0.0]
    assert list(df["names_the_cause"]) == [False, False, True]
    ok = [RankOutcome(r, RankStatus.OK) for r in range(3)]
    reasons = {0: {"stopped_early": True, "stop_reason": "PeerFailedError: stopping rank 0: rank 2 raised ValueError: x"},
               1: {"stopped_early": True, "stop_reason": "PeerFailedError: stopping rank 1: rank 2 raised ValueError: x"},
               2: {"stopped_early": True, "stop_reason": "ValueError: x"}}
    df2 = exc.stop_frame(_result(rows, ok, reasons))
    assert df2["names_the_cause"].all() and set(df2["status"]) == {"stopped"}


# -- dataloader-stall ---------------------------------------------------------------------------------
def test_loader_timeout_helpers() -> None:
    assert fixes.loader_timeout_for(600) == 150.0
    assert fixes.loader_timeout_for(3, fraction=1 / 3) == 1.0
    with pytest.raises(ValueError, match="must give up first"):
        fixes.loader_timeout_for(3, fraction=1.0)
    ds = dls.ShardDataset(8, 4)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2, timeout=3)
    assert "not well below" in fixes.loader_problems(loader, 3)[0]
    assert fixes.loader_problems(torch.utils.data.DataLoader(ds, num_workers=2, timeout=1), 3) == []
    assert "no timeout" in fixes.loader_problems(torch.utils.data.DataLoader(ds, num_workers=2), 3)[0]
    assert "needs num_workers > 0" in fixes.loader_problems(torch.utils.data.DataLoader(ds, timeout=1), 3)[0]
    assert fixes.loader_problems(torch.utils.data.DataLoader(ds), 3) == []


def test_stalled_read_times_out_then_workers_are_released_and_joined() -> None:
    import multiprocessing

    mp = multiprocessing.get_context("fork")
    release = mp.Event()
    ds = dls.ShardDataset(8, 4, hang_indices=frozenset({4}), hang_s=30, release=release)
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=2, timeout=0.5, multiprocessing_context=mp)
    it = iter(loader)
    workers = list(it._workers)
    assert next(it).shape == (2, 4) and next(it).shape == (2, 4)
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        next(it)
    assert 0.4 < time.perf_counter() - t0 < 2.5
    release.set()
    t1 = time.perf_counter()
    fixes.shutdown_workers(it)
    assert time.perf_counter() - t1 < 3 and not any(w.is_alive() for w in workers)
    fixes.shutdown_workers(iter([1, 2]))  # no workers: nothing to do


def test_dataloader_params_are_checked() -> None:
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        dls.Params(num_workers=0)
    p = SCENARIOS["dataloader-stall"].params_for("short-loader-timeout")
    assert p.fail_fast and p.loader_timeout_fraction == pytest.approx(1 / 3) and p.num_workers == 2


def test_stacks_name_standard_library_files_without_the_install_prefix() -> None:
    # a stalled rank's stack runs through multiprocessing: no machine path in stored notebooks
    import os
    import sysconfig

    from nccl_workbook.live import short_paths

    stdlib = sysconfig.get_paths()["stdlib"]
    text = f'  File "{stdlib}{os.sep}multiprocessing{os.sep}queues.py", line 113, in get\n'
    assert short_paths(text) == f'  File "multiprocessing{os.sep}queues.py", line 113, in get\n'
