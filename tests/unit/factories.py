"""One small factory for synthetic trace rows, so unit tests need no cluster and no GPU."""

from __future__ import annotations

from nccl_workbook.trace import TraceRow, trace_frame

S = 1_000_000_000  # ns per second


def coll(rank: int, seq: int, t_s: float, end_s: float | None, status: str = "ok", *, op: str = "ALLREDUCE",
         pg: str = "0", numel: int | None = 1, dtype: str | None = None) -> TraceRow:
    return TraceRow(rank=rank, kind="collective", name=op, pg=pg, seq=seq, numel=numel,
                    nbytes=None if numel is None else 4 * numel, t_enqueue_ns=int(t_s * S), t_start_ns=int(t_s * S),
                    t_end_ns=None if end_s is None else int(end_s * S), status=status, dtype=dtype)


def step(rank: int, i: int, t_s: float, end_s: float | None, status: str = "ok") -> TraceRow:
    return TraceRow(rank=rank, kind="step", name="step", step=i, t_enqueue_ns=int(t_s * S), t_start_ns=int(t_s * S),
                    t_end_ns=None if end_s is None else int(end_s * S), status="running" if end_s is None else status)


def frame(rows):  # noqa: ANN001, ANN201
    return trace_frame(rows)
