"""What runs on each engine: one rank of one run, from process-group init to destroy.

:func:`run_rank` is sent to every engine by :class:`nccl_workbook.cluster.RankCluster` (pickled by
reference, so this package must be importable on the engines). It initialises a fresh process
group (free port, the run's ``timeout=``), installs the tracer, calls the rank program, and always
destroys the group in ``finally``, so that the next run starts clean. Whatever happens (a timeout,
a peer closing, an exception in the program) comes back as a :class:`RankReport` value; only the
death of the process itself is seen by the client as a crash.

A rank program is a module-level function ``program(ctx: RankContext, params) -> dict`` where
``params`` is the scenario's frozen parameter dataclass and the returned dict holds a few scalar
metrics (samples generated, bytes, …).

On NCCL the engine must survive a timeout: the watchdog's default handling
(``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``) ends the process with SIGABRT, a minute after the timeout.
Before each NCCL init the workbook sets ``TORCH_NCCL_ASYNC_ERROR_HANDLING=2`` (the watchdog aborts
the communicators and the process lives on), ``TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=500`` (it acts
2 s after the timeout instead of 60 s) and ``TORCH_NCCL_BLOCKING_WAIT=0``. Measured on one H200
with torch 2.11 (tests/gpu, README): a synchronous collective does not block on
``BLOCKING_WAIT=1`` either, and with it the watchdog leaves timeouts to ``wait()``, so that nobody
reports them. A timed-out collective therefore raises in no Python thread; after the program the
rank asks the group for the watchdog's error (``get_error()``) and names the collective from the
flight recorder.
"""

from __future__ import annotations

import datetime
import faulthandler
import io
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from nccl_workbook.results import RankReport
from nccl_workbook.status import RankStatus, classify_error, error_text
from nccl_workbook.trace import Tracer

__all__ = ["RankContext", "RankSpec", "EngineInfo", "run_rank", "engine_setup"]


@dataclass(frozen=True)
class EngineInfo:
    """What an engine reports about itself once torch is imported."""

    pid: int
    host: str
    torch_version: str
    cuda_devices: int
    time_ns: int


@dataclass(frozen=True)
class RankSpec:
    """Everything one rank needs for one run."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    init_method: str
    pg_timeout_s: float
    program: Callable[..., dict[str, Any] | None]
    params: Any
    debug_level: str | None = None  # TORCH_DISTRIBUTED_DEBUG for this run: OFF | INFO | DETAIL
    #: also return the flight-recorder dump when the run succeeds (it always comes back on failure)
    flight_recorder: bool = False
    #: (host, port, run_id) of the client's progress hub, for live hang detection; None: off
    progress: tuple[str, int, str] | None = None
    #: wrap the collectives with the tracer (off for micro-benchmarks, where ~10 µs per call matters)
    trace: bool = True
    #: file the tracer also appends its rows to, so they survive the engine's death (local runs)
    spill_path: str | None = None
    #: initialise the process group before the program (off for a user's script, which calls
    #: ``init_process_group()`` itself from the environment: see ``RankContext.init_method``)
    init_group: bool = True


@dataclass
class RankContext:
    """Handed to a rank program: who am I, on which device, with which tracer."""

    rank: int
    world_size: int
    local_rank: int
    backend: str
    pg_timeout_s: float
    tracer: Tracer
    device: Any  # torch.device
    #: ``tcp://host:port`` of this run's rendezvous
    init_method: str = ""

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def engine_setup() -> EngineInfo:
    """Run once per engine: import torch (already imported when the engine was forked from the
    fork server; otherwise the slow part, ~1.5 s of CPU), one thread per rank, a 1-rank warm-up."""
    import torch
    import torch.distributed  # noqa: F401  (warm the imports a first run would otherwise pay for)
    import torch.distributed.algorithms.ddp_comm_hooks.default_hooks  # noqa: F401
    import torch.nn.parallel  # noqa: F401

    torch.set_num_threads(1)
    try:  # stacks on fatal signals go to the engine's log (its sys.stderr is a zmq stream)
        faulthandler.enable(file=sys.__stderr__)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        pass
    _warm_up()
    cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return EngineInfo(os.getpid(), socket.gethostname(), torch.__version__, cuda, time.time_ns())


def _warm_up() -> None:
    """Pay the one-time costs of a first process group and a first DDP model (lazy imports,
    ~2.5 s on 2 cores) here, at cluster start, instead of inside the first timed run: a 1-rank
    gloo group on an in-memory store, one DDP forward/backward, destroyed again."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    if dist.is_initialized():
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = DistributedDataParallel(torch.nn.Linear(2, 2))
        model(torch.zeros(1, 2)).sum().backward()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def engine_clock() -> int:
    """This engine's wall clock, for the cluster's offset estimate."""
    return time.time_ns()


@contextmanager
def _debug_level(level: str | None) -> Iterator[None]:
    """Set TORCH_DISTRIBUTED_DEBUG for one run (torch reads it at import, so it is applied
    explicitly) and restore the previous level afterwards: :func:`nccl_workbook.fixes.debug_level`."""
    if level is None:
        yield
        return
    from nccl_workbook.fixes.desync import debug_level

    with debug_level(level):
        yield


def _reset_group_names() -> None:
    """torch names the default group (and unnamed groups) by a per-process counter that
    ``new_group`` increments and only a *successful* destroy of the default group resets; the
    rendezvous keys carry that name (``default_pg/<n>/...``). An engine whose earlier run ended in
    a failed destroy, or made side groups, would wait under another name than a fresh replacement
    engine, and the run would time out in ``init_process_group`` on every rank. Every run starts
    from the same name: what ``destroy_process_group`` does for a healthy group."""
    try:
        from torch.distributed import distributed_c10d as c10d

        if not c10d.is_initialized():
            c10d._world.group_count = 0  # noqa: SLF001
    except Exception:  # noqa: BLE001 - an older or newer torch without it: nothing to reset
        pass


def run_rank(spec: RankSpec) -> RankReport:
    """Run one rank of one run; never raises for what the rank program or the group does."""
    import torch
    import torch.distributed as dist

    t_begin = time.time_ns()
    publisher = None
    if spec.progress is not None:
        from nccl_workbook.live import ProgressPublisher

        host, port, run_id = spec.progress
        publisher = ProgressPublisher((host, port), run_id, spec.rank)
    tracer = Tracer(spec.rank, on_event=publisher.on_event if publisher is not None else None, spill=spec.spill_path)
    if publisher is not None:
        tracer.on_group = publisher.note_group
    status, error, exc_type, tb = RankStatus.OK, None, None, None
    in_rendezvous = False
    watchdog: str | None = None
    metrics: dict[str, Any] = {}
    device = torch.device("cpu")
    if spec.backend == "nccl":
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "0"  # with 1 the watchdog ignores timeouts (measured)
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "2"
        # after a timeout the watchdog sleeps 4 x this (default 15 s: a minute, measured on torch 2.11)
        # before it aborts the communicators; a run's timeout should show within the run
        os.environ["TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC"] = "500"
        torch.cuda.set_device(spec.local_rank)
        device = torch.device("cuda", spec.local_rank)
    try:
        with _debug_level(spec.debug_level):
            # a failed earlier run may have left a group behind (it should not, but be sure)
            if dist.is_initialized():
                dist.destroy_process_group()
            _reset_group_names()
            kwargs: dict[str, Any] = {}
            if spec.backend == "nccl":
                kwargs["device_id"] = device
            if spec.init_group:
                in_rendezvous = True
                dist.init_process_group(
                    spec.backend,
                    init_method=spec.init_method,
                    rank=spec.rank,
                    world_size=spec.world_size,
                    timeout=datetime.timedelta(seconds=spec.pg_timeout_s),
                    **kwargs,
                )
                in_rendezvous = False
            ctx = RankContext(spec.rank, spec.world_size, spec.local_rank, spec.backend, spec.pg_timeout_s, tracer, device,
                              spec.init_method)
            if spec.trace:
                with tracer.installed():
                    metrics = dict(spec.program(ctx, spec.params) or {})
            else:
                metrics = dict(spec.program(ctx, spec.params) or {})
    except BaseException as e:  # noqa: BLE001 - every failure of a rank is data
        exc_type = type(e).__name__
        error = error_text(e)[:2000]
        status = classify_error(exc_type, str(e))
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-12))[-6000:]
    finally:
        if publisher is not None:
            publisher.close()
        tracer.close()
        if spec.backend == "nccl" and (status is RankStatus.OK or "aborted" in (error or "")):
            # a timed-out NCCL collective raises in no Python thread; the program either finishes
            # (once the stalled kernel does) or fails later on the aborted communicator
            watchdog = _watchdog_error()
            if watchdog == "TIMEOUT":  # other errors come with their own exception (or were aborted on purpose)
                status, exc_type = RankStatus.TIMEOUT, "DistBackendError"
            else:
                watchdog = None
        fr_dump = _flight_recorder_dump(spec.backend) if (status is not RankStatus.OK or spec.flight_recorder) else None
        if watchdog is not None:
            error = _watchdog_report(watchdog, _pending_collective(fr_dump, t_begin), tracer, status) + (
                f"; then: {error}" if error else "")
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - a dead group may refuse; the next init replaces it
                pass
    return RankReport(
        rank=spec.rank,
        status=status,
        error=error,
        exc_type=exc_type,
        traceback=tb,
        steps=tracer.steps_done,
        step_times_ns=tuple(tracer.step_times_ns),
        rows=tuple(tracer.rows),
        metrics={k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool, type(None)))},
        pid=os.getpid(),
        host=socket.gethostname(),
        t_begin_ns=t_begin,
        t_end_ns=time.time_ns(),
        fr_dump=fr_dump,
        rendezvous_failed=in_rendezvous and status is not RankStatus.OK,
    )


def _watchdog_error() -> str | None:
    """NCCL: the error ProcessGroupNCCL's watchdog recorded for the default group (``TIMEOUT``,
    ``COMM_ERROR``, ``REMOTE_ERROR``), None if none or if this torch cannot say (``get_error()``)."""
    try:
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            return None
        backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cuda"))
        for name in ("get_error", "_get_error"):
            fn = getattr(backend, name, None)
            if fn is not None:
                err = getattr(fn(), "name", "")
                return None if not err or err == "SUCCESS" else str(err)
    except Exception:  # noqa: BLE001 - cannot tell: leave the run's status alone
        return None
    return None


def _pending_collective(fr_dump: bytes | None, since_ns: int) -> tuple[str, int] | None:
    """(op, sequence number) of the collective of this run that the watchdog timed out, as NCCL's
    flight recorder shows it: the newest one still unfinished, else the newest one whose completion
    was seen later than its timeout (an aborted one may be retired as completed). Only for naming
    the op once ``get_error()`` said TIMEOUT: the completion times alone also flagged healthy runs
    (measured on the H200). None if none (or no recorder)."""
    try:
        from nccl_workbook.flight.dumps import nccl_op_name, parse_dump

        mine = [e for e in (parse_dump(fr_dump, 0).entries if fr_dump else ()) if e.time_created_ns >= since_ns]
        pending = [e for e in mine if e.state.value != "completed"] or [
            e for e in mine if e.timeout_ms and e.time_discovered_completed_ns
            and e.time_discovered_completed_ns - e.time_created_ns > e.timeout_ms * 1e6]
        return (nccl_op_name(pending[-1].profiling_name), pending[-1].collective_seq_id) if pending else None
    except Exception:  # noqa: BLE001 - cannot tell
        return None


def _watchdog_report(kind: str, late: tuple[str, int] | None, tracer: Tracer, status: RankStatus) -> str:
    """The error text of a failure only the watchdog saw, naming the collective the flight recorder
    holds unfinished, whose traced row is then marked with the status."""
    if late is not None:
        try:
            for row in reversed(list(tracer.rows)):
                if row.kind == "collective" and row.name == late[0] and row.status == "ok":
                    tracer._replace(row, t_end_ns=row.t_end_ns or time.time_ns(), status=status.value)
                    break
        except Exception:  # noqa: BLE001 - the report keeps the row as it was
            pass
    what = f"WorkNCCL(SeqNum={late[1]}, OpType={late[0]})" if late else "a collective"
    return f"ProcessGroupNCCL's watchdog reported {kind} for {what} (its own lines are in the rank's log)"


def _flight_recorder_dump(backend: str = "gloo") -> bytes | None:
    """torch's flight-recorder ring buffer of this process (None where torch has none). NCCL keeps
    its own recorder (CUDA events), dumped by ``_dump_nccl_trace``; ``_dump_fr_trace`` is gloo's."""
    try:
        import torch

        c10d = torch._C._distributed_c10d
        dump = getattr(c10d, "_dump_nccl_trace", None) if backend == "nccl" else None
        return bytes((dump or c10d._dump_fr_trace)())
    except Exception:  # noqa: BLE001 - a missing or failing recorder must not change the run's result
        return None
