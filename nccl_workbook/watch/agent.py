"""The rank side of ``nccl-workbook watch``: loaded into every rank process of an unchanged script.

``watch`` puts :mod:`nccl_workbook.watch.bootstrap` first on ``PYTHONPATH``; its ``sitecustomize``
calls :func:`activate` in every Python process the launcher starts. Only a process that has
``RANK`` and ``WORLD_SIZE`` (a rank, under torchrun, ``python -m torch.distributed.run``, srun with
those set, mpirun with a wrapper that sets them) and ``$NCCL_WORKBOOK_WATCH`` (the hub's
``host:port:run_id``) does anything; the launcher itself and the DataLoader's worker processes
(same environment, but ``multiprocessing`` children) do not. Then:

- a :class:`~nccl_workbook.trace.Tracer` keeps a window of the newest rows (bounded memory) and
  appends every row to a spill file in ``$NCCL_WORKBOOK_WATCH_DIR`` (rotated, bounded disk), from
  which ``watch`` builds the trace when the job ends;
- once the script has imported torch, its collectives are wrapped (an import hook: torch
  is not imported before the script imports it, so environment variables the script sets first,
  such as ``TORCH_DISTRIBUTED_DEBUG``, still count); DDP's gradient all-reduce is routed through a
  comm hook at each model's first forward and steps are marked at every optimizer step
  (:mod:`nccl_workbook.watch.hooks`);
- a :class:`~nccl_workbook.live.ProgressPublisher` thread publishes where the rank is and answers
  stack requests; at exit the rank publishes how it ended (``ok``, or the exception's status and
  text; ``killed`` when the launcher's SIGTERM ended it).

Never harms the job: no collective of its own, nothing blocking on the training thread (connecting to
the hub happens in the publisher thread), and any failure of the agent only turns watching off.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import multiprocessing
import os
import signal
import socket
import sys
import time
from typing import Any

__all__ = ["activate", "WATCH_ENV", "WATCH_DIR_ENV", "MAX_ROWS", "SPILL_MAX_BYTES"]

#: ``host:port:run_id`` of the watching process's hub
WATCH_ENV = "NCCL_WORKBOOK_WATCH"
#: folder for the ranks' spill files
WATCH_DIR_ENV = "NCCL_WORKBOOK_WATCH_DIR"
#: rows each rank keeps in memory; spill file size before it rotates (one older file is kept)
MAX_ROWS = 20_000
SPILL_MAX_BYTES = 32 * 2**20

_agent: _Agent | None = None


def activate() -> bool:
    """Start watching this process if it is a rank of a watched job; True when it did. Never raises."""
    global _agent
    try:
        if _agent is not None:
            return True
        spec, rank, ws = os.environ.get(WATCH_ENV), os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        if not (spec and rank and ws) or not _is_rank_process(rank):
            return False
        host, port, run_id = spec.rsplit(":", 2)
        _agent = _Agent(host, int(port), run_id, int(rank), int(ws))
        return True
    except Exception:  # noqa: BLE001 - watching is optional; the job is not
        return False


def _is_rank_process(rank: str) -> bool:
    """Not a helper process that inherited the rank's environment: a multiprocessing child
    (DataLoader workers started with spawn or forkserver, the resource tracker), a subprocess of a
    rank (its parent has the same ``RANK``), or the launcher itself (``RANK`` exported in the shell)."""
    orig = list(getattr(sys, "orig_argv", sys.argv))
    argv = " ".join(orig)
    if "multiprocessing" in argv or multiprocessing.parent_process() is not None:
        return False
    launchers = ("torch.distributed.run", "torch.distributed.launch")
    if any(a in launchers or os.path.basename(a) == "torchrun" for a in orig[:4]):
        return False
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            parent = f.read().split(b"\0")
        if f"RANK={rank}".encode() in parent and any(e.startswith(b"WORLD_SIZE=") for e in parent):
            return False
    except OSError:
        pass
    return True


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls ``callback(module)`` once ``name`` has been imported (executed), whoever imports it."""

    def __init__(self, name: str, callback: Any) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _CallbackLoader(spec.loader, self.callback)
        return spec


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, callback: Any) -> None:
        self._inner, self._callback = inner, callback

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            self._callback(module)
        except Exception:  # noqa: BLE001
            pass

    def __getattr__(self, name: str) -> Any:  # get_data, is_package, … of the real loader
        return getattr(self._inner, name)


class _Agent:
    def __init__(self, host: str, port: int, run_id: str, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size
        self._address, self._run_id = (host, port), run_id
        self.publisher: Any = None
        self.tracer: Any = None
        self._final_posted = False
        self._excepthook = sys.excepthook
        sys.excepthook = self._on_exception
        atexit.register(self._at_exit)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        # Nothing touches torch before the script imports it (torch reads some variables, such as
        # TORCH_DISTRIBUTED_DEBUG, at import, and the script may set them first). torch imports
        # torch.distributed inside its own __init__: act once torch as a whole is ready.
        if "torch" in sys.modules:
            self._on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _AfterImport("torch", self._on_torch))

    def _on_torch(self, torch: Any) -> None:
        import torch.distributed as dist

        from nccl_workbook.live import ProgressPublisher
        from nccl_workbook.trace import Tracer
        from nccl_workbook.watch.hooks import mark_optimizer_steps, trace_ddp_gradients

        if not dist.is_available():
            return
        rank = self.rank
        self.publisher = ProgressPublisher(self._address, self._run_id, rank,
                                           clock_sync=self._address[0] not in ("127.0.0.1", "localhost"))
        folder = os.environ.get(WATCH_DIR_ENV)
        spill = os.path.join(folder, f"rank{rank}.jsonl") if folder and os.path.isdir(folder) else None
        self.tracer = Tracer(rank, on_event=self.publisher.on_event, spill=spill, max_rows=MAX_ROWS,
                             spill_max_bytes=SPILL_MAX_BYTES)
        self.tracer.on_group = self.publisher.note_group
        self.publisher.post(f"who/{rank}", json.dumps({
            "rank": rank, "world_size": self.world_size, "pid": os.getpid(), "host": socket.gethostname(),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0") or 0), "t_ns": time.time_ns()}))
        self.tracer.install()
        self._note_group_timeout(dist)
        for hook in (trace_ddp_gradients, mark_optimizer_steps):
            try:
                hook(self.tracer)
            except Exception:  # noqa: BLE001 - that part of the picture is missing, the job goes on
                pass

    def _note_group_timeout(self, dist: Any) -> None:
        """Publish the timeout the script gives ``init_process_group`` (torch's default if none), so
        that ``watch`` can tell a late rank from one that merely came last."""
        original = dist.init_process_group
        agent = self

        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                from torch.distributed.distributed_c10d import _get_default_timeout

                timeout = kwargs.get("timeout") or _get_default_timeout(dist.get_backend())
                agent.publisher.post(f"timeout/{agent.rank}", str(timeout.total_seconds()))
            except Exception:  # noqa: BLE001
                pass
            return result

        init_process_group.__wrapped__ = original  # type: ignore[attr-defined]
        dist.init_process_group = init_process_group
        dist.distributed_c10d.init_process_group = init_process_group

    def _post_final(self, status: str, error: str | None) -> None:
        if self._final_posted or self.publisher is None:
            return
        self._final_posted = True
        self.publisher.post(f"final/{self.rank}", json.dumps({
            "status": status, "error": error, "steps": self.tracer.steps_done, "t_ns": time.time_ns()}))
        self.publisher.close()
        self.tracer.close()

    def _on_exception(self, exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        try:
            from nccl_workbook.status import classify_error, error_text

            self._post_final(classify_error(exc_type.__name__, str(exc)).value, error_text(exc))
        except Exception:  # noqa: BLE001
            pass
        self._excepthook(exc_type, exc, tb)

    def _at_exit(self) -> None:
        try:
            self._post_final("ok", None)
        except Exception:  # noqa: BLE001
            pass

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        try:
            self._post_final("killed", "terminated by SIGTERM (the launcher stopping the job)")
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
