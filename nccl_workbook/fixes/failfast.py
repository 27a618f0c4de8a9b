"""Fail fast: when one rank raises, every rank stops within a second, naming it (seed 000 §3).

The broken pattern: one rank raises (a corrupt sample, a data-loader timeout) while the others
are already inside the next collective. Under NCCL nobody tells them: they wait until the
process-group timeout (10 minutes by default) and then report a *collective timeout*, far from the
real error, which sits in the failing rank's log, if that process printed it at all. The rank's
process stays alive when it is stuck in its error handling (a DataLoader worker being joined, a
non-daemon thread, a hanging ``destroy_process_group``); if it exits instead, ``torchrun`` stops the
other ranks, which is the fast path this guard makes reliable.

:class:`FailFast` is a context manager that every rank wraps around its training loop:

- on an exception inside it, the rank publishes a :class:`FailureRecord` (rank, exception type and
  message, time) in the process group's store, waits (at most ``ack_timeout_s``, usually one
  ``poll_s``) until every other rank has read it, leaves its group and re-raises;
- every other rank learns it within ``poll_s``: a watcher thread polls the store, keeps the record
  and aborts its own communicators (NCCL: ``_abort_process_group``, which makes a blocked
  collective return); the collective that then fails is turned into a :class:`PeerFailedError`
  naming the failing rank and its original exception.

Backends: torch 2.13's gloo backend has no working abort (``Backend.abort`` is a no-op for gloo;
measured: ``pg.abort()``, ``pg.shutdown()``, ``_abort_process_group()`` and
``destroy_process_group()`` called from another thread all leave a blocked gloo collective waiting
for its full timeout). Gloo peers are freed instead when the failing rank's group object goes away,
which closes its connections (the peers fail at once with ``Connection closed by peer``). Note
that ``destroy_process_group()`` only unregisters the group: a DDP model still holds it, so the
connections close when the exception has left the training code (or the process exits). The
guard does both, so it works on either backend; the workbook's CPU runs exercise the gloo path.

Seed 000's ending (``training_succeeded`` flag, ``dist.barrier()`` only on success,
``time.sleep(2)`` "to give other ranks time to detect the error") does not tell anyone anything:
the peers are stuck in the *next* collective of training, not at that barrier, and the sleep only
delays the failing rank's own teardown (see notebook 03). Keep its barrier-on-success shape, and
put the guard inside it.

Usage (every rank, right after ``init_process_group``)::

    from nccl_workbook.fixes import FailFast, PeerFailedError

    try:
        with FailFast():                 # one guard per training run and process group
            train(model, loader)
        dist.barrier()                   # only reached when every rank succeeded
    finally:
        if dist.is_initialized():        # the guard has already torn the group down after a failure
            dist.destroy_process_group()

Inside long loops that do not call collectives often, ``guard.check()`` raises
:class:`PeerFailedError` as soon as a peer's failure is known.

Limits: the store must still be reachable (rank 0 hosts the default TCPStore: if rank 0's process
dies outright, the peers fall back to their timeout); on gloo, code that keeps the failing rank's
model alive after the guard re-raised (a long ``finally``) also keeps its peers waiting; the record
holds the first line of the exception text only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any

__all__ = ["FailFast", "FailureRecord", "PeerFailedError"]

log = logging.getLogger(__name__)

#: substrings of a collective's error that mean "a peer went away", not "this rank's own fault"
#: (not "timed out": a data-loader timeout is a rank's own failure, and a peer's record is known
#: before its departure frees anyone, see ``__exit__``)
_PEER_GONE = ("connection closed by peer", "connection reset by peer", "pair closure", "broken pipe",
              "ncclremoteerror", "aborted")


@dataclass(frozen=True)
class FailureRecord:
    """What the first failing rank publishes: who failed, with what, and when (``time.time_ns``)."""

    rank: int
    exc_type: str
    message: str
    time_ns: int

    def describe(self) -> str:
        """``rank 2 raised ValueError: corrupt sample 1234``"""
        return f"rank {self.rank} raised {self.exc_type}: {self.message}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> FailureRecord:
        d = json.loads(text)
        return cls(int(d["rank"]), str(d["exc_type"]), str(d["message"]), int(d["time_ns"]))

    @classmethod
    def of(cls, rank: int, exc: BaseException) -> FailureRecord:
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:300]
        return cls(rank, type(exc).__name__, text, time.time_ns())


class PeerFailedError(RuntimeError):
    """Raised on every rank other than the one that failed first; ``record`` says who and why."""

    def __init__(self, record: FailureRecord, this_rank: int) -> None:
        self.record = record
        self.this_rank = this_rank
        super().__init__(f"stopping rank {this_rank}: {record.describe()}")


class FailFast:
    """Context manager for every rank: see the module docstring.

    ``name`` keys the record in the store (use a different name for a second guarded run in the
    same process group); ``poll_s`` is how often the watcher looks at the store; ``ack_timeout_s``
    bounds how long the failing rank waits for the others to read its record (it keeps the store,
    which rank 0 hosts, alive meanwhile); ``grace_s`` how long a rank whose collective failed waits
    for a peer's record before concluding that it failed first itself.
    """

    def __init__(self, *, name: str = "train", group: Any = None, store: Any = None, poll_s: float = 0.05,
                 ack_timeout_s: float = 1.0, grace_s: float = 0.3) -> None:
        if poll_s <= 0 or ack_timeout_s < 0 or grace_s < 0:
            raise ValueError(f"need poll_s > 0, ack_timeout_s >= 0, grace_s >= 0; got {poll_s}, {ack_timeout_s}, {grace_s}")
        if not name or "/" in name:
            raise ValueError(f"name must be a non-empty string without '/', got {name!r}")
        self.name = name
        self.group = group
        self.poll_s = poll_s
        self.ack_timeout_s = ack_timeout_s
        self.grace_s = grace_s
        self._store_arg = store
        self._store: Any = None
        self._key = f"nccl_workbook/failfast/{name}"
        self._rank = -1
        self._world = 0
        self._backend = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peer_failure: FailureRecord | None = None
        self._acked = False
        self._lock = threading.Lock()
        #: set on exit: the record of the first failure (this rank's or a peer's), None on success
        self.failure: FailureRecord | None = None

    def __repr__(self) -> str:
        state = "idle" if self._thread is None else "watching" if self._thread.is_alive() else "done"
        return f"<FailFast(name={self.name!r}, rank={self._rank}, {state}, failure={self.failure})>"

    # -- entering and checking ------------------------------------------------------------------
    def __enter__(self) -> FailFast:
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        if not dist.is_initialized():
            raise RuntimeError("FailFast needs an initialised process group: call dist.init_process_group() first")
        self._store = self._store_arg if self._store_arg is not None else c10d._get_default_store()
        self._rank = dist.get_rank()
        self._world = dist.get_world_size(self.group)
        self._backend = str(dist.get_backend(self.group))
        self._stop.clear()
        self._acked = False
        self._thread = threading.Thread(target=self._watch, name=f"failfast-{self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def peer_failure(self) -> FailureRecord | None:
        """A peer's failure, as soon as the watcher has seen it (None while all is well)."""
        return self._peer_failure

    def check(self) -> None:
        """Raise :class:`PeerFailedError` if another rank has failed (cheap: no store access)."""
        rec = self._peer_failure
        if rec is not None:
            raise PeerFailedError(rec, self._rank)

    # -- the watcher ------------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                rec = self._read()
            except Exception:  # noqa: BLE001 - store gone (run over): nothing left to watch
                return
            if rec is not None and rec.rank != self._rank:
                with self._lock:
                    self._peer_failure = rec
                self._ack()  # the failing rank waits for these acks before it leaves its group
                log.warning("rank %d: %s", self._rank, rec.describe())
                self._abort_local()
                return

    def _abort_local(self) -> None:
        """Make this rank's blocked collective return. NCCL: abort the communicators. Gloo has no
        abort in torch 2.13 (a no-op): its collectives fail once the failing rank's group is gone."""
        if self._backend != "nccl":
            return
        from torch.distributed import distributed_c10d as c10d

        try:
            c10d._abort_process_group(self.group)
        except Exception as e:  # noqa: BLE001 - best effort; the timeout remains the fallback
            log.warning("rank %d: aborting the process group failed: %s", self._rank, e)

    # -- store ------------------------------------------------------------------------------------
    def _read(self) -> FailureRecord | None:
        if not self._store.check([self._key]):
            return None
        return FailureRecord.from_json(self._store.get(self._key))

    def _publish(self, rec: FailureRecord) -> FailureRecord:
        """Publish ``rec`` unless another rank was first; return the record that won."""
        won = self._store.compare_set(self._key, "", rec.to_json())
        return FailureRecord.from_json(won)

    def _ack(self) -> None:
        if self._acked:
            return
        self._acked = True
        try:
            self._store.add(self._key + "/acks", 1)
        except Exception:  # noqa: BLE001 - the failing rank may be gone; it only waits a bounded time
            pass

    def _wait_for_acks(self) -> None:
        deadline = time.monotonic() + self.ack_timeout_s
        while time.monotonic() < deadline:
            try:
                if self._store.add(self._key + "/acks", 0) >= self._world - 1:
                    return
            except Exception:  # noqa: BLE001
                return
            time.sleep(min(self.poll_s, 0.02))

    def _tear_down(self) -> None:
        """Leave the group so that the peers' pending collectives fail now (gloo: closing the
        connections does it; NCCL: abort, the peers' watchers abort their own side)."""
        import torch.distributed as dist
        from torch.distributed import distributed_c10d as c10d

        try:
            if self._backend == "nccl":
                c10d._abort_process_group(self.group)
            elif dist.is_initialized():
                dist.destroy_process_group(self.group)
        except Exception as e:  # noqa: BLE001 - best effort
            log.warning("rank %d: tearing the process group down failed: %s", self._rank, e)

    # -- leaving ------------------------------------------------------------------------------------
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc is None:
            rec = self._peer_failure or self._read_quietly()
            if rec is not None and rec.rank != self._rank:
                # this rank finished, but a peer failed: the next collective would never complete
                self.failure = rec
                self._ack()
                raise PeerFailedError(rec, self._rank)
            return False
        if isinstance(exc, PeerFailedError):
            self.failure = exc.record
            self._ack()
            return False
        rec = self._peer_failure or self._read_quietly()
        if rec is None and _looks_like_peer_gone(exc):
            deadline = time.monotonic() + self.grace_s
            while rec is None and time.monotonic() < deadline:
                time.sleep(0.01)
                rec = self._read_quietly()
        if rec is not None and rec.rank != self._rank:
            self.failure = rec
            self._ack()
            raise PeerFailedError(rec, self._rank) from exc
        # this rank failed first (or raced another rank and lost: then report the winner)
        mine = FailureRecord.of(self._rank, exc)
        try:
            winner = self._publish(mine)
        except Exception as e:  # noqa: BLE001 - store unreachable: nothing to tell anyone
            log.warning("rank %d: could not publish its failure: %s", self._rank, e)
            self.failure = mine
            return False
        self.failure = winner
        if winner.rank != self._rank:
            self._ack()
            raise PeerFailedError(winner, self._rank) from exc
        log.error("rank %d failed first: %s; telling the other ranks", self._rank, mine.describe())
        # the peers' watchers ack once they have read the record (usually within poll_s); only
        # then leave the group, so that no peer is freed before it knows why
        self._wait_for_acks()
        self._tear_down()
        return False  # re-raise the original exception

    def _read_quietly(self) -> FailureRecord | None:
        try:
            return self._read()
        except Exception:  # noqa: BLE001
            return None


def _looks_like_peer_gone(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(m in text for m in _PEER_GONE) or type(exc).__name__ in {"DistBackendError", "DistNetworkError"}
