"""Per-rank timings of training steps, compute regions and collectives, as one tidy DataFrame.

On each rank a :class:`Tracer` wraps the ``torch.distributed`` collectives (``all_reduce``,
``barrier``, ``all_gather``, …) so that user code stays unchanged, and records one row per event.
``Tracer.step(i)`` and ``Tracer.region(name)`` mark training steps and compute regions (the "sample
generation" of a scenario). DDP's gradient all-reduce runs in C++ and never passes through the
Python functions, so :meth:`Tracer.trace_ddp` registers a comm hook that routes each gradient
bucket through the traced ``all_reduce`` (same arithmetic as DDP's default hook).

The frame (:func:`trace_frame`) has one row per (rank, event), times as integer nanoseconds on the
wall clock (``time.time_ns``; per-rank clock offsets are applied by the cluster for multi-host
runs), nullable dtypes instead of sentinels:

============== ======== ==========================================================================
column         dtype    meaning
============== ======== ==========================================================================
rank           Int64    global rank
kind           string   ``step`` | ``region`` | ``collective``
name           string   op in NCCL's spelling (``ALLREDUCE``, ``BARRIER``, ``ALLGATHER``, …), or
                        the step/region name
pg             string   process-group name (collectives only)
seq            Int64    per-process-group sequence number on this rank, from 1 (collectives only)
step           Int64    training step the event belongs to (NA outside steps)
numel          Int64    elements in the input (NA for barrier)
nbytes         Int64    bytes in the input
t_enqueue_ns   Int64    when the rank called the op / entered the step or region
t_start_ns     Int64    when the op began on this rank (for CPU/gloo ops: the call time)
t_end_ns       Int64    when it completed or failed on this rank; NA if it never did
status         string   ``ok`` | ``timeout`` | ``peer_closed`` | ``error`` | ``running`` |
                        ``crashed`` (the rank's process died inside it; rows read back from its
                        spill file)
dtype          string   element type of the input in torch's spelling (``float32``, ``bfloat16``, …;
                        several, comma-separated, for a list of tensors that differ); NA for barrier
============== ======== ==========================================================================

A collective's time on a rank is mostly *waiting* for the last rank to arrive; which rank that was
is a cross-rank question answered by :mod:`nccl_workbook.diagnose`.

Known limits: for asynchronous NCCL ops the end time is taken when the work's future completes
(host side), not from CUDA events; the tracer adds about a few µs per collective (see
``bench/tracer_overhead.py``).

Usage (on a rank)::

    tracer = Tracer(rank=dist.get_rank())
    with tracer.installed():
        for i, batch in enumerate(loader):
            with tracer.step(i):
                loss = model(batch).sum(); loss.backward(); opt.step()
    df = trace_frame(tracer.rows)
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from nccl_workbook.ops import OPS, TRACED
from nccl_workbook.status import RankStatus, classify_error

__all__ = [
    "COLUMNS",
    "Tracer",
    "TraceRow",
    "trace_frame",
    "validate_trace",
    "TraceValidationError",
    "read_spill",
    "close_open_rows",
    "join_dtypes",
]

#: column name -> pandas dtype; the frame has exactly these columns, in this order
COLUMNS: dict[str, str] = {
    "rank": "Int64",
    "kind": "string",
    "name": "string",
    "pg": "string",
    "seq": "Int64",
    "step": "Int64",
    "numel": "Int64",
    "nbytes": "Int64",
    "t_enqueue_ns": "Int64",
    "t_start_ns": "Int64",
    "t_end_ns": "Int64",
    "status": "string",
    "dtype": "string",
}
_KINDS = {"step", "region", "collective"}
#: one encoder for the spill lines (``json.dumps`` with arguments builds a new one per call: a hot path)
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
_STATUSES = {s.value for s in RankStatus} | {"running"}


@dataclass(frozen=True, kw_only=True)
class TraceRow:
    """One event on one rank, built by keyword; the fields are the frame's :data:`COLUMNS`.
    A row that closes is a new row (``dataclasses.replace(row, t_end_ns=..., status=...)``)."""

    rank: int
    kind: str
    name: str
    t_enqueue_ns: int
    status: str
    pg: str | None = None
    seq: int | None = None
    step: int | None = None
    numel: int | None = None
    nbytes: int | None = None
    t_start_ns: int | None = None
    t_end_ns: int | None = None
    dtype: str | None = None

    @property
    def key(self) -> tuple[object, ...]:
        """What identifies the event on its rank: fields that never change when the row closes."""
        return (self.kind, self.name, self.pg, self.seq, self.step, self.t_enqueue_ns)

    def to_json(self) -> str:
        """One line of a spill file: the fields by name."""
        return _ENCODE(vars(self))


def read_spill(path: str) -> tuple[TraceRow, ...]:
    """The rows a :class:`Tracer` spilled to ``path``, each in its last state, in the order they
    opened: what a rank had recorded when its process died. A torn last line is skipped; a missing
    file gives no rows."""
    latest: dict[tuple[object, ...], TraceRow] = {}
    lines: list[str] = []
    for part in (path + ".1", path):  # a rotated older file first (Tracer(spill_max_bytes=...))
        try:
            with open(part, encoding="utf-8") as f:
                lines += f.read().splitlines()
        except OSError:
            continue
    for line in lines:
        try:
            row = TraceRow(**json.loads(line))
        except (ValueError, TypeError):
            continue
        latest[row.key] = row  # a dict keeps first-insertion order
    return tuple(latest.values())


def close_open_rows(rows: Sequence[TraceRow], others: Iterable[TraceRow], *, fallback_ns: int) -> tuple[TraceRow, ...]:
    """A dead rank's rows that were still open end, with status ``crashed``, when it died. That
    moment is not recorded; the best estimate is the first time after its last event at which a
    peer saw a connection close (gloo peers notice within milliseconds), else ``fallback_ns``
    (when the client learnt of the death)."""
    if not rows:
        return ()
    last = max(max(r.t_enqueue_ns, r.t_end_ns or 0) for r in rows)
    seen = [o.t_end_ns for o in others
            if o.status == RankStatus.PEER_CLOSED.value and o.t_end_ns is not None and o.t_end_ns >= last]
    died = min(seen, default=max(fallback_ns, last))
    return tuple(replace(r, t_end_ns=died, status=RankStatus.CRASHED.value) if r.t_end_ns is None else r for r in rows)


class TraceValidationError(ValueError):
    """A trace frame does not have the documented columns, dtypes or invariants."""


def trace_frame(rows: Iterable[TraceRow], *, offsets_ns: dict[int, int] | None = None) -> pd.DataFrame:
    """Rows -> validated frame, one row per event, in time order.

    ``offsets_ns`` maps rank -> nanoseconds to *subtract* from that rank's times (its clock's
    lead over the client's), for traces from several hosts.
    """
    records = [[getattr(r, c) for c in COLUMNS] for r in rows]
    # object first: a column of ints with None would otherwise go through float64 and lose the last
    # digits of nanosecond wall-clock times (they round to 256 ns)
    df = pd.DataFrame(records, columns=list(COLUMNS), dtype=object) if records else pd.DataFrame(columns=list(COLUMNS))
    df = df.astype(COLUMNS)
    if offsets_ns:
        shift = df["rank"].map(lambda r: offsets_ns.get(int(r), 0)).astype("Int64")
        for col in ("t_enqueue_ns", "t_start_ns", "t_end_ns"):
            df[col] = df[col] - shift
    df = df.sort_values(["t_enqueue_ns", "rank"], kind="stable").reset_index(drop=True)
    validate_trace(df)
    return df


def validate_trace(df: pd.DataFrame) -> None:
    """Raise :class:`TraceValidationError` naming what is wrong with ``df``."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceValidationError(f"trace frame lacks columns {missing}; expected {list(COLUMNS)}")
    for col, dtype in COLUMNS.items():
        if str(df[col].dtype) != dtype:
            raise TraceValidationError(f"column {col!r} has dtype {df[col].dtype}, expected {dtype}")
    if len(df) == 0:
        return
    bad_kind = set(df["kind"].dropna().unique()) - _KINDS
    if bad_kind:
        raise TraceValidationError(f"unknown kind(s) {sorted(bad_kind)}; expected one of {sorted(_KINDS)}")
    bad_status = set(df["status"].dropna().unique()) - _STATUSES
    if bad_status:
        raise TraceValidationError(f"unknown status(es) {sorted(bad_status)}; expected {sorted(_STATUSES)}")
    if df["rank"].isna().any() or df["t_enqueue_ns"].isna().any():
        raise TraceValidationError("every row needs a rank and a t_enqueue_ns")
    ended = df["t_end_ns"].notna()
    if (df.loc[ended, "t_end_ns"] < df.loc[ended, "t_enqueue_ns"]).any():
        raise TraceValidationError("a row ends before it was enqueued (t_end_ns < t_enqueue_ns)")
    coll = df["kind"] == "collective"
    if df.loc[coll, "seq"].isna().any():
        raise TraceValidationError("collective rows need a seq number")


def _tensor_size(obj: Any) -> tuple[int | None, int | None, str | None]:
    """(numel, nbytes, dtype) of a tensor or a list of tensors; Nones for anything else. ``dtype``
    in torch's spelling without ``torch.``; the distinct dtypes, sorted and comma-separated, for a
    list of tensors that differ."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel(), obj.numel() * obj.element_size(), dtype_name(obj.dtype)
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(t, torch.Tensor) for t in obj):
        n = sum(t.numel() for t in obj)
        return n, sum(t.numel() * t.element_size() for t in obj), join_dtypes(dtype_name(t.dtype) for t in obj)
    return None, None, None


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


def join_dtypes(names: Iterable[str | None]) -> str | None:
    """The ``dtype`` cell for several tensors: the distinct names, sorted, comma-separated (names
    that are such lists already are split first); None when any is unknown or there are none."""
    names = list(names)
    if not names or any(n is None for n in names):
        return None
    return ",".join(sorted({part for n in names for part in n.split(",")}))


# which positional argument holds the *input* tensor(s), per op
_INPUT_ARG: dict[str, int] = {
    "all_reduce": 0, "broadcast": 0, "reduce": 0, "all_gather": 1, "all_gather_single": 1,
    "all_gather_into_tensor": 1, "gather": 0, "scatter": 1, "reduce_scatter": 1,
    "reduce_scatter_single": 1, "reduce_scatter_tensor": 1, "all_to_all": 1,
    "all_to_all_single": 1, "send": 0, "recv": 0,
}
_INPUT_KW: dict[str, str] = {
    "all_reduce": "tensor", "broadcast": "tensor", "reduce": "tensor", "all_gather": "tensor",
    "gather": "tensor", "send": "tensor", "recv": "tensor", "reduce_scatter": "input_list",
    "scatter": "scatter_list", "all_to_all": "input_tensor_list",
}


class Tracer:
    """Records steps, regions and collectives of one rank. Not thread-safe across ranks: one per
    process. ``on_event`` (optional) is called with every row as it is opened and closed; the live
    progress publisher uses it."""

    def __init__(self, rank: int, *, on_event: Callable[[TraceRow], None] | None = None,
                 spill: str | None = None, max_rows: int | None = None, spill_max_bytes: int | None = None) -> None:
        """``spill``: a file to which every row is also appended as it opens and closes (one JSON
        line each, one ``write`` call), so that the rows of a process that dies can be read back
        with :func:`read_spill`. Costs a few µs per event; :meth:`close` closes the file.

        For a long job (``nccl-workbook watch``): ``max_rows`` keeps only the newest rows in memory
        (and the newest step times), ``spill_max_bytes`` starts a new spill file once the current
        one is that big, keeping one previous file (``<spill>.1``), so memory and disk stay bounded."""
        self.rank = rank
        self._spill_path = spill
        self._spill_max_bytes = spill_max_bytes
        self._spill_written = 0
        self._spill_fd: int | None = None
        if spill:
            try:
                self._spill_fd = os.open(spill, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            except OSError:  # no spill then; the rows still come back with a rank that finishes
                pass
        self.rows: collections.deque[TraceRow] = collections.deque(maxlen=max_rows)
        self.step_times_ns: collections.deque[int] = collections.deque(maxlen=max_rows)
        self._steps_done = 0
        self.on_event = on_event
        #: process group -> its timeout in seconds, as first seen; ``on_group(pg, timeout_s)`` hears of each
        self.pg_timeouts_s: dict[str, float | None] = {}
        self.on_group: Callable[[str, float], None] | None = None
        self._seq: dict[str, int] = {}
        self._current_step: int | None = None
        self._next_step: int | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._originals: dict[tuple[object, str], Callable[..., Any]] = {}
        #: async collectives not yet closed: id(row) -> (row, its future); one entry per collective in flight
        self._pending: dict[int, tuple[TraceRow, Any]] = {}

    # -- steps and regions ---------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, index: int) -> Iterator[None]:
        """Mark one training step. Its row is ``ok`` if the body returns, else the error's status."""
        self._current_step = index
        t0 = time.time_ns()
        self._emit(TraceRow(rank=self.rank, kind="step", name="step", step=index, t_enqueue_ns=t0, t_start_ns=t0,
                            status="running"))
        status = "ok"
        try:
            yield
        except BaseException as e:
            status = classify_error(type(e).__name__, str(e)).value
            raise
        finally:
            self._settle_finished()
            t1 = time.time_ns()
            self._close_last("step", index, t1, status)
            if status == "ok":
                self.step_times_ns.append(t1 - t0)
                self._steps_done += 1
            self._current_step = None

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        """Mark a compute region (``generate_samples``, ``log_flush``, …) on this rank."""
        t0 = time.time_ns()
        row = TraceRow(rank=self.rank, kind="region", name=name, step=self._current_step, t_enqueue_ns=t0, t_start_ns=t0,
                       status="running")
        self._emit(row)
        status = "ok"
        try:
            yield
        except BaseException as e:
            status = classify_error(type(e).__name__, str(e)).value
            raise
        finally:
            self._replace(row, t_end_ns=time.time_ns(), status=status)

    @property
    def steps_done(self) -> int:
        return self._steps_done

    def mark_step(self) -> None:
        """Step boundaries without a ``with tracer.step(i)`` in the user's code: end the open step
        (if any) as ``ok``; the next step opens at :meth:`begin_pending_step` or at the next
        collective, so the time after the last step is not a step. ``nccl-workbook watch`` calls it
        after every optimizer step, and :meth:`begin_pending_step` at every DDP forward."""
        now = time.time_ns()
        index = self._current_step
        if index is not None:
            self._close_last("step", index, now, "ok")
            self._record_step_time(index, now)
        self._current_step = None
        self._next_step = 0 if index is None and self._next_step is None else (
            index + 1 if index is not None else self._next_step)

    def begin_pending_step(self) -> None:
        """Open the step that :meth:`mark_step` (or :meth:`auto_steps`) left pending, if any."""
        if self._next_step is not None and self._current_step is None:
            index, self._next_step = self._next_step, None
            self._current_step = index
            t = time.time_ns()
            self._emit(TraceRow(rank=self.rank, kind="step", name="step", step=index, t_enqueue_ns=t, t_start_ns=t,
                                status="running"))

    def auto_steps(self) -> None:
        """Number steps from 0 by :meth:`mark_step`; step 0 opens at the first DDP forward or collective."""
        if self._current_step is None and self._next_step is None:
            self._next_step = 0

    def _record_step_time(self, index: int, t_end_ns: int) -> None:
        for r in reversed(self.rows):
            if r.kind == "step" and r.step == index:
                self.step_times_ns.append(t_end_ns - r.t_enqueue_ns)
                self._steps_done += 1
                return

    # -- collectives ---------------------------------------------------------------------------
    def install(self) -> None:
        """Wrap the collectives in ``torch.distributed`` (and ``distributed_c10d``, so that helpers
        such as ``all_gather_object`` that call them internally are traced too)."""
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d

        for fn_name in TRACED:
            op = OPS[fn_name]
            for module in (dist, c10d):
                original = getattr(module, fn_name, None)
                if original is None or (module, fn_name) in self._originals:
                    continue
                if getattr(original, "__nccl_workbook_traced__", False):
                    original = original.__wrapped__  # a tracer left installed by a failed run
                self._originals[(module, fn_name)] = original
                setattr(module, fn_name, self._wrap(fn_name, op, original))

    def uninstall(self) -> None:
        """Put the original functions back."""
        for (module, fn_name), original in self._originals.items():
            setattr(module, fn_name, original)
        self._originals.clear()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Tracer]:
        self.install()
        try:
            yield self
        finally:
            self.uninstall()

    def trace_ddp(self, ddp_model: Any) -> None:
        """Route DDP's gradient-bucket all-reduce through the traced ``all_reduce``.

        Same arithmetic as DDP's default hook (divide by world size, then sum); call once after
        wrapping the model, before the first backward.
        """
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp_model.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)

    def _wrap(self, fn_name: str, op: str, original: Callable[..., Any]) -> Callable[..., Any]:
        tracer = self

        @functools.wraps(original)
        def traced(*args: Any, **kwargs: Any) -> Any:
            if getattr(tracer._local, "depth", 0):
                return original(*args, **kwargs)  # inner call of a traced op: recorded by the outer
            group = kwargs.get("group")
            if group is None and fn_name in {"barrier", "monitored_barrier"} and args:
                group = args[0]
            pg = tracer._pg_name(group)
            if pg not in tracer.pg_timeouts_s:
                tracer._note_group(pg, group)
            src = args[_INPUT_ARG[fn_name]] if fn_name in _INPUT_ARG and len(args) > _INPUT_ARG[fn_name] else kwargs.get(_INPUT_KW.get(fn_name, ""), None)
            numel, nbytes, dtype = _tensor_size(src)
            if tracer._next_step is not None:
                tracer.begin_pending_step()
            with tracer._lock:
                seq = tracer._seq[pg] = tracer._seq.get(pg, 0) + 1
            t0 = time.time_ns()
            row = TraceRow(rank=tracer.rank, kind="collective", name=op, pg=pg, seq=seq, step=tracer._current_step,
                           numel=numel, nbytes=nbytes, t_enqueue_ns=t0, t_start_ns=t0, status="running", dtype=dtype)
            tracer._emit(row)
            tracer._local.depth = 1
            try:
                result = original(*args, **kwargs)
            except BaseException as e:
                tracer._replace(row, t_end_ns=time.time_ns(), status=classify_error(type(e).__name__, str(e)).value)
                raise
            finally:
                tracer._local.depth = 0
            if kwargs.get("async_op") and result is not None and hasattr(result, "get_future"):
                tracer._close_when_done(row, result)
            else:
                tracer._replace(row, t_end_ns=time.time_ns(), status="ok")
            return result

        traced.__nccl_workbook_traced__ = True  # type: ignore[attr-defined]
        return traced

    def _close_when_done(self, row: TraceRow, work: Any) -> None:
        fut = work.get_future()
        with self._lock:
            self._pending[id(row)] = (row, fut)

        def done(fut: Any) -> Any:
            self._close_pending(row, fut)
            return fut.value()   # (a failure goes on to the futures chained after this one)

        fut.then(done)

    def _close_pending(self, row: TraceRow, fut: Any) -> None:
        """Close a finished async collective's row once (from its future's callback, or at the end of the step):
        ``ok``, or the status of the error it failed with."""
        try:
            fut.value()
        except BaseException as e:  # noqa: BLE001 - the collective failed: its status says how
            status = classify_error(type(e).__name__, str(e)).value
        else:
            status = "ok"
        # taken from the pending ones and closed in one hold of the lock: a step that ends meanwhile finds it either
        # still pending (and closes it itself) or closed, never taken and still running
        with self._lock:
            if self._pending.pop(id(row), None) is None:
                return   # already closed
            new = self._swap(row, t_end_ns=time.time_ns(), status=status)
        self._announce(new)

    def _settle_finished(self) -> None:
        """Close the rows of async collectives whose future is done. Its callback may run after the caller's own
        wait returned (DDP waits on its comm hook's future, and the callbacks of a completed future run after the
        waiters are woken), so a step could end with a finished all-reduce still marked running."""
        with self._lock:
            pending = list(self._pending.values())
        for row, fut in pending:
            if fut.done():
                self._close_pending(row, fut)

    def _note_group(self, pg: str, group: Any) -> None:
        """Remember the group's timeout (seconds; None where torch does not say) and pass it to
        ``on_group``: a wait in the group whose timeout runs out first is the one that will fail."""
        timeout_s = None
        try:
            import torch.distributed as dist

            g = group if group is not None else dist.group.WORLD
            for device in g._device_types:
                timeout_s = g._get_backend(device).options._timeout.total_seconds()
                break
        except Exception:  # noqa: BLE001 - a backend without options: unknown
            pass
        self.pg_timeouts_s[pg] = timeout_s
        if self.on_group is not None and timeout_s is not None:
            self.on_group(pg, timeout_s)

    @staticmethod
    def _pg_name(group: Any) -> str:
        if group is None:
            import torch.distributed as dist

            group = dist.group.WORLD
        name = getattr(group, "group_name", None)
        return str(name) if name is not None else str(id(group))

    # -- row bookkeeping -----------------------------------------------------------------------
    def _emit(self, row: TraceRow) -> None:
        with self._lock:
            self.rows.append(row)
        self._spill(row)
        if self.on_event is not None:
            self.on_event(row)

    def _spill(self, row: TraceRow) -> None:
        if self._spill_fd is None:
            return
        line = (row.to_json() + "\n").encode()
        with self._lock:  # against close() from another thread: never write to a reused fd number
            if self._spill_fd is not None:
                try:
                    os.write(self._spill_fd, line)
                    self._spill_written += len(line)
                    if self._spill_max_bytes is not None and self._spill_written >= self._spill_max_bytes:
                        self._rotate_spill()
                except OSError:
                    pass

    def _rotate_spill(self) -> None:
        """Keep the current spill file as ``<spill>.1`` (replacing an older one) and start a new one.
        Called with the lock held."""
        assert self._spill_path is not None and self._spill_fd is not None
        os.close(self._spill_fd)
        os.replace(self._spill_path, self._spill_path + ".1")
        self._spill_fd = os.open(self._spill_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._spill_written = 0

    def close(self) -> None:
        """Close the spill file (the rows in memory stay)."""
        with self._lock:
            if self._spill_fd is not None:
                os.close(self._spill_fd)
                self._spill_fd = None

    def _replace(self, row: TraceRow, *, t_end_ns: int, status: str) -> None:
        with self._lock:
            new = self._swap(row, t_end_ns=t_end_ns, status=status)
        self._announce(new)

    def _swap(self, row: TraceRow, *, t_end_ns: int, status: str) -> TraceRow:
        """Put the closed row in the open one's place (the caller holds the lock)."""
        new = replace(row, t_end_ns=t_end_ns, status=status)
        for i in range(len(self.rows) - 1, -1, -1):
            if self.rows[i] is row:
                self.rows[i] = new
                break
        return new

    def _announce(self, new: TraceRow) -> None:
        """Tell the spill file and ``on_event`` of a row just closed (outside the lock)."""
        self._spill(new)
        if self.on_event is not None:
            self.on_event(new)

    def _close_last(self, kind: str, step: int, t_end_ns: int, status: str) -> None:
        with self._lock:
            for i in range(len(self.rows) - 1, -1, -1):
                r = self.rows[i]
                if r.kind == kind and r.step == step and r.t_end_ns is None:
                    row = r
                    break
            else:  # pragma: no cover - step rows are always opened first
                return
        self._replace(row, t_end_ns=t_end_ns, status=status)
