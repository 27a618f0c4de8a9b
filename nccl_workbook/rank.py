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
(``TORCH_NCCL_ASYNC_ERROR_HANDLING=3``) tears the process down. The workbook sets
``TORCH_NCCL_BLOCKING_WAIT=1`` (the timed-out collective raises in the calling thread, like gloo)
and ``TORCH_NCCL_ASYNC_ERROR_HANDLING=2`` (abort the communicators, keep the process) before each
NCCL init. This path is written for multi-GPU hosts and was not run on one here (see README).
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
    metrics: dict[str, Any] = {}
    device = torch.device("cpu")
    if spec.backend == "nccl":
        os.environ["TORCH_NCCL_BLOCKING_WAIT"] = "1"
        os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "2"
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
        fr_dump = _flight_recorder_dump() if (status is not RankStatus.OK or spec.flight_recorder) else None
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


def _flight_recorder_dump() -> bytes | None:
    """torch's flight-recorder ring buffer of this process (None where torch has none)."""
    try:
        import torch

        return bytes(torch._C._distributed_c10d._dump_fr_trace())
    except Exception:  # noqa: BLE001 - a missing or failing recorder must not change the run's result
        return None
