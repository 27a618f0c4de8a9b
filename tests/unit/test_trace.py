"""The tracer on a real 1-rank gloo group in this process (no cluster needed)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import torch.distributed as dist

from nccl_workbook.trace import COLUMNS, Tracer, TraceRow, TraceValidationError, read_spill, trace_frame, validate_trace

from .factories import coll, frame


@pytest.fixture()
def group():  # noqa: ANN201
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_tracer_records_collectives_steps_and_regions(group: None) -> None:
    original = dist.all_reduce
    tracer = Tracer(rank=0)
    with tracer.installed():
        assert dist.all_reduce is not original
        with tracer.step(0):
            t = torch.ones(10)
            dist.all_reduce(t)
            with tracer.region("generate_samples"):
                pass
            work = dist.all_reduce(torch.ones(3, dtype=torch.float64), async_op=True)
            work.wait()
        out: list[object] = [None]
        dist.all_gather_object(out, {"a": 1})  # traced through its inner all_gather calls
        dist.barrier()
    assert dist.all_reduce is original  # uninstalled
    df = trace_frame(tracer.rows)
    assert list(df.columns) == list(COLUMNS)
    colls = df[df["kind"] == "collective"]
    assert list(colls["name"])[:2] == ["ALLREDUCE", "ALLREDUCE"]
    assert "ALLGATHER" in set(colls["name"]) and colls["name"].iloc[-1] == "BARRIER"
    assert list(colls["seq"]) == list(range(1, len(colls) + 1))  # one counter per group, from 1
    first = colls.iloc[0]
    assert first["numel"] == 10 and first["nbytes"] == 40 and first["step"] == 0
    assert colls.iloc[1]["nbytes"] == 24 and colls.iloc[1]["dtype"] == "float64"
    assert first["dtype"] == "float32"
    assert (df["status"] == "ok").all() and df["t_end_ns"].notna().all()
    assert set(df["kind"]) == {"step", "region", "collective"}
    assert tracer.steps_done == 1
    assert pd.isna(colls.iloc[-1]["numel"]) and pd.isna(colls.iloc[-1]["dtype"])  # barrier has no tensor


def test_dtype_of_tensor_lists_and_rows_from_before_the_column(group: None) -> None:
    tracer = Tracer(rank=0)
    with tracer.installed():
        out = [torch.zeros(2, dtype=torch.bfloat16)]
        dist.all_gather(out, torch.ones(2, dtype=torch.bfloat16))
    df = trace_frame(tracer.rows)
    assert df["dtype"].iloc[0] == "bfloat16"
    from nccl_workbook.trace import _tensor_size

    assert _tensor_size([torch.ones(2), torch.ones(3, dtype=torch.int64)]) == (5, 8 + 24, "float32,int64")
    # a row of a barrier has no dtype: NA in the frame
    assert pd.isna(trace_frame([coll(0, 1, 0.0, 0.1, op="BARRIER", numel=None)])["dtype"].iloc[0])


def test_spilled_rows_read_back_in_their_last_state(group: None, tmp_path) -> None:  # noqa: ANN001
    path = str(tmp_path / "rank0.jsonl")
    tracer = Tracer(rank=0, spill=path)
    with tracer.installed():
        with tracer.step(0):
            dist.all_reduce(torch.ones(4, dtype=torch.float16))
        tracer._emit(TraceRow(rank=0, kind="collective", name="BARRIER", pg="0", seq=2, t_enqueue_ns=5, t_start_ns=5,
                              status="running"))
    tracer.close()
    tracer.close()  # twice is fine
    with open(path, "a") as f:
        f.write('{"rank":0,"kind":"collective","name":"ALLRE')  # a line torn by the process dying mid-write
    rows = read_spill(path)
    assert [(r.rank, r.kind, r.name) for r in rows] == [(0, "step", "step"), (0, "collective", "ALLREDUCE"),
                                                        (0, "collective", "BARRIER")]
    assert rows[0].status == "ok" and rows[1].status == "ok" and rows[1].dtype == "float16"  # closed versions won
    assert rows[2].status == "running" and rows[2].t_end_ns is None  # still in it when the rank "died"
    df = trace_frame(rows)
    assert df.loc[df["name"] == "ALLREDUCE", "dtype"].tolist() == ["float16"]
    assert read_spill(str(tmp_path / "missing.jsonl")) == ()
    assert Tracer(rank=0, spill=str(tmp_path / "no" / "such" / "dir.jsonl"))._spill_fd is None  # no spill, no error


def test_failed_collective_and_step_are_recorded(group: None) -> None:
    tracer = Tracer(rank=0)
    with tracer.installed(), pytest.raises(Exception):
        with tracer.step(3):
            dist.all_reduce("not a tensor")  # type: ignore[arg-type]
    df = trace_frame(tracer.rows)
    assert df[df["kind"] == "collective"]["status"].iloc[0] == "error"
    assert df[df["kind"] == "step"]["status"].iloc[0] == "error"
    assert tracer.steps_done == 0


def test_ddp_comm_hook_traces_gradient_allreduce(group: None) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    tracer = Tracer(rank=0)
    with tracer.installed():
        model = DDP(torch.nn.Linear(8, 8))
        tracer.trace_ddp(model)
        with tracer.step(0):
            model(torch.randn(2, 8)).sum().backward()
    df = trace_frame(tracer.rows)
    grads = df[(df["kind"] == "collective") & (df["name"] == "ALLREDUCE")]
    assert len(grads) >= 1 and grads["numel"].sum() == 8 * 8 + 8
    assert (grads["status"] == "ok").all()


def test_validation_names_the_problem() -> None:
    df = frame([coll(0, 1, 1.0, 2.0)])
    validate_trace(df)
    with pytest.raises(TraceValidationError, match="lacks columns"):
        validate_trace(df.drop(columns=["seq"]))
    with pytest.raises(TraceValidationError, match="dtype"):
        validate_trace(df.astype({"seq": "float64"}))
    bad = df.copy()
    bad.loc[0, "t_end_ns"] = 0
    with pytest.raises(TraceValidationError, match="ends before"):
        validate_trace(bad)
    bad = df.copy()
    bad.loc[0, "status"] = "weird"
    with pytest.raises(TraceValidationError, match="unknown status"):
        validate_trace(bad)


def test_offsets_shift_times_per_rank() -> None:
    df = trace_frame([coll(0, 1, 1.0, 2.0), coll(1, 1, 1.0, 2.0)], offsets_ns={1: 500_000_000})
    r1 = df[df["rank"] == 1].iloc[0]
    assert r1["t_enqueue_ns"] == 500_000_000 and r1["t_end_ns"] == 1_500_000_000
    assert trace_frame([]).empty


class _DoneWork:
    """An async collective's work whose future has finished but has not yet run the callbacks chained to it (as
    when DDP's wait on its comm hook returns first): the state a step can end in."""

    class _Future:
        def __init__(self, error: BaseException | None) -> None:
            self.error = error
            self.callbacks: list = []

        def done(self) -> bool:
            return True

        def value(self) -> object:
            if self.error is not None:
                raise self.error
            return [torch.zeros(1)]

        def then(self, callback):  # noqa: ANN001, ANN201
            self.callbacks.append(callback)

    def __init__(self, error: BaseException | None = None) -> None:
        self.future = self._Future(error)

    def get_future(self) -> _Future:
        return self.future


def test_a_step_closes_the_async_collectives_that_finished_in_it() -> None:
    tracer = Tracer(rank=0)
    ok, failed = _DoneWork(), _DoneWork(RuntimeError("Connection closed by peer"))
    with tracer.step(0):
        for work in (ok, failed):
            row = TraceRow(rank=0, kind="collective", name="ALLREDUCE", pg="0", seq=1, step=0, t_enqueue_ns=1,
                           t_start_ns=1, status="running")
            tracer._emit(row)
            tracer._close_when_done(row, work)
    statuses = [r.status for r in tracer.rows if r.kind == "collective"]
    assert statuses[0] == "ok" and statuses[1] not in ("ok", "running")
    # the callbacks that run later change nothing: each row is closed once
    for work in (ok, failed):
        for callback in work.future.callbacks:
            try:
                callback(work.future)
            except RuntimeError:
                pass
    assert [r.status for r in tracer.rows if r.kind == "collective"] == statuses
