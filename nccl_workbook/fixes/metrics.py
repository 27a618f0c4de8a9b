"""Training metrics that cost every rank the same and logging that never blocks the step (seed 004).

The broken pattern: rank 0 alone computes gradient and parameter norms for its progress bar the
slow way (one norm per parameter, stacked, ``.item()``), and writes its log synchronously, now and
then pushing it to an experiment tracker or shared storage (a flush that can take seconds). While
it does, ranks 1..N-1 wait in the next gradient all-reduce; one flush longer than the
process-group timeout kills the job with ``OpType=ALLREDUCE … ran for 600017 milliseconds``.

Two fixes, both for every rank's training loop:

1. :func:`total_norms`: the gradient norm that ``clip_grad_norm_`` already returns (you clip
   anyway) and the parameter norm from ``torch.nn.utils.get_total_norm`` (one fused
   ``_foreach_norm`` per device and dtype): cheap, the same work on every rank, and no device-to-
   host copy until the one ``.item()`` that the logger needs.
2. :class:`BackgroundLogger`: ``log()`` puts the record on a queue and returns; a thread writes and
   flushes, however long that takes. The step never waits for the log.

Usage::

    from nccl_workbook.fixes import BackgroundLogger, total_norms

    with BackgroundLogger(write=my_tracker.log, flush=my_tracker.flush, flush_every=50) as logger:
        for step, batch in enumerate(loader):
            loss = model(batch).mean(); loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            grad_norm, param_norm = total_norms(model.parameters(), grad_norm=grad_norm)
            opt.step(); opt.zero_grad()
            if rank == 0:
                logger.log({"step": step, "loss": loss.item(), "grad_norm": grad_norm.item(),
                            "param_norm": param_norm.item()})
    # leaving the block waits for the last writes; do it after the last collective
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

__all__ = ["total_norms", "BackgroundLogger"]

log = logging.getLogger(__name__)


def total_norms(parameters: Iterable[Any], *, grad_norm: Any = None, norm_type: float = 2.0) -> tuple[Any, Any]:
    """(gradient norm, parameter norm) of ``parameters`` as 0-dim tensors on their device.

    ``grad_norm``: the value ``torch.nn.utils.clip_grad_norm_`` returned this step, if you clip
    (it is the same total norm, computed once). Otherwise it is computed here with
    ``torch.nn.utils.get_total_norm`` over the gradients that exist. No ``.item()`` here: call it
    only where the number is needed (on the rank that logs).

    >>> import torch
    >>> p = torch.nn.Parameter(torch.tensor([3.0, 4.0])); p.grad = torch.tensor([0.0, 2.0])
    >>> [round(float(t), 3) for t in total_norms([p])]
    [2.0, 5.0]
    """
    import torch
    from torch.nn.utils import get_total_norm

    params = [p for p in parameters]
    device = params[0].device if params else None
    if grad_norm is None:
        grads = [p.grad for p in params if p.grad is not None]
        grad_norm = get_total_norm(grads, norm_type) if grads else torch.tensor(0.0, device=device)
    with torch.no_grad():
        param_norm = get_total_norm([p.detach() for p in params], norm_type) if params else torch.tensor(0.0)
    return grad_norm, param_norm


class BackgroundLogger:
    """Write and flush log records on a thread, so that the training step never waits for them.

    ``write(record)`` is called for every record, ``flush()`` (optional) after every
    ``flush_every`` records; both on the logger's thread, in order. ``log()`` never blocks: when
    ``max_pending`` records are already waiting (the sink is slower than training for a long
    time), the new record is dropped and counted in ``dropped``. ``close()`` (or leaving the
    ``with`` block) waits for the pending records, at most ``timeout_s``; call it after the
    last collective of the run. An exception in ``write``/``flush`` is kept in ``errors`` and
    logged; the thread goes on with the next record.
    """

    def __init__(self, write: Callable[[Mapping[str, Any]], None], *, flush: Callable[[], None] | None = None,
                 flush_every: int = 0, max_pending: int = 10_000, name: str = "background-logger") -> None:
        if flush_every < 0 or max_pending < 1:
            raise ValueError(f"need flush_every >= 0 and max_pending >= 1, got {flush_every}, {max_pending}")
        if flush_every and flush is None:
            raise ValueError("flush_every needs a flush function")
        self._write = write
        self._flush = flush
        self.flush_every = flush_every
        self._queue: queue.Queue[Mapping[str, Any] | None] = queue.Queue(maxsize=max_pending)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self.written = 0
        self.dropped = 0
        self.errors: list[str] = []
        #: seconds the thread spent in write/flush (what the training step no longer waits for)
        self.busy_s = 0.0
        self._thread.start()

    def __repr__(self) -> str:
        return (f"<BackgroundLogger(written={self.written}, pending={self._queue.qsize()}, dropped={self.dropped}, "
                f"busy_s={self.busy_s:.3f}, {'closed' if self._closed else 'open'})>")

    def log(self, record: Mapping[str, Any]) -> bool:
        """Queue ``record``; returns False if it was dropped (queue full or logger closed)."""
        if self._closed:
            self.dropped += 1
            return False
        try:
            self._queue.put_nowait(dict(record))
            return True
        except queue.Full:
            self.dropped += 1
            return False

    def _run(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                break
            t0 = time.perf_counter()
            try:
                self._write(record)
                self.written += 1
                if self.flush_every and self.written % self.flush_every == 0 and self._flush is not None:
                    self._flush()
            except Exception as e:  # noqa: BLE001 - a failing sink must not kill training
                self.errors.append(f"{type(e).__name__}: {e}")
                log.warning("background logger: %s", self.errors[-1])
            finally:
                self.busy_s += time.perf_counter() - t0

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop accepting records, wait for the pending ones (at most ``timeout_s``). Returns True
        when the thread has finished."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)  # after every pending record
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def __enter__(self) -> BackgroundLogger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
