"""The ranks' side of live detection: each rank publishes where it is, and answers stack requests.

A rank blocked in a collective cannot answer anybody, so each rank publishes its progress another
way: a :class:`ProgressPublisher` thread keeps the rank's current state (in which step, which
compute region, which collective since when, the last sequence number entered and completed per
process group) in a small TCP key-value store that the watching process hosts (the observer's
:class:`~nccl_workbook.observer.ProgressHub`, a ``torch.distributed.TCPStore`` server). The tracer's
hot path only updates a few attributes; the thread publishes at most every 50 ms, and only when
something changed. When the hub asks, the thread sends the Python stack of the rank's main thread
(``sys._current_frames``, so it works while the main thread is blocked in C++).

What the states mean, and when a wait becomes a stall, is the observer's business
(:mod:`nccl_workbook.observer`). Nothing here can harm the rank: a hub that cannot be reached, or
that goes away, only turns publishing off.

Usage (``run_rank`` and the ``watch`` bootstrap do this)::

    pub = ProgressPublisher((host, port), run_id, rank)
    tracer = Tracer(rank, on_event=pub.on_event)
    ...
    pub.close()
"""

from __future__ import annotations

import datetime
import json
import socket
import statistics
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RankProgress", "ProgressPublisher", "connect_store", "short_paths", "PUBLISH_EVERY_S"]

PUBLISH_EVERY_S = 0.05


@dataclass(frozen=True)
class RankProgress:
    """One rank's published state (all times: wall-clock ns on that rank)."""

    rank: int
    t_ns: int
    step: int | None = None
    step_since_ns: int | None = None
    region: str | None = None
    region_since_ns: int | None = None
    coll_op: str | None = None
    coll_pg: str | None = None
    coll_seq: int | None = None
    coll_since_ns: int | None = None
    entered: dict[str, int] = field(default_factory=dict)    # pg -> last seq entered
    completed: dict[str, int] = field(default_factory=dict)  # pg -> last seq completed
    coll_latency_median_ns: int | None = None
    steps_done: int = 0
    step_time_median_ns: int | None = None
    pg_timeouts_s: dict[str, float] = field(default_factory=dict)  # pg -> its timeout (s)

    def where(self, now_ns: int) -> str:
        """Human-readable: what the rank is doing now and for how long."""
        if self.coll_op is not None and self.coll_since_ns is not None:
            return f"in {self.coll_op} (pg {self.coll_pg}, seq {self.coll_seq}) for {(now_ns - self.coll_since_ns) / 1e9:.1f} s"
        if self.region is not None and self.region_since_ns is not None:
            return f"in region '{self.region}' for {(now_ns - self.region_since_ns) / 1e9:.1f} s"
        if self.step is not None and self.step_since_ns is not None:
            return f"in step {self.step} (outside any collective) for {(now_ns - self.step_since_ns) / 1e9:.1f} s"
        return "outside any traced step, region or collective"

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> RankProgress:
        return cls(**json.loads(text))


def connect_store(host: str, port: int, *, master: bool, timeout_s: float = 10.0) -> Any:
    """A ``TCPStore`` server (``master``: the hub) or client (a rank's publisher)."""
    from torch.distributed import TCPStore

    return TCPStore(host, port, is_master=master, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s))


class ProgressPublisher:
    """Engine side: receives the tracer's events, publishes the rank's state, answers stack requests.

    ``on_event`` is cheap (attribute updates); the thread does all the network I/O, including
    connecting (so a hub that cannot be reached never blocks the rank), and :meth:`post` hands it
    other keys to publish. Stops on :meth:`close` (always called by ``run_rank``)."""

    def __init__(self, address: tuple[str, int], run_id: str, rank: int, *, connect_timeout_s: float = 5.0,
                 clock_sync: bool = False) -> None:
        """``clock_sync``: once connected, estimate this host's clock lead over the hub's (a few
        ping/pong rounds through the store, answered by the hub's poll loop; the round with the
        shortest round trip wins, its error at most half of it) and publish it as ``offset/<rank>``."""
        self.run_id, self.rank = run_id, rank
        self._clock_sync = clock_sync
        self._address, self._connect_timeout_s = address, connect_timeout_s
        self._outbox: deque[tuple[str, str]] = deque(maxlen=256)
        self._connected = threading.Event()
        self._state: dict[str, Any] = {"rank": rank, "t_ns": time.time_ns(), "entered": {}, "completed": {}, "steps_done": 0,
                                       "pg_timeouts_s": {}}
        self._lat: deque[int] = deque(maxlen=64)
        self._step_times: deque[int] = deque(maxlen=64)
        self._open: dict[int, tuple[str, str | None, int | None, int]] = {}
        self._dirty = True
        self._stop = threading.Event()
        self._main_ident = threading.main_thread().ident
        self._last_request: bytes | None = None
        self._store: Any = None
        self._thread = threading.Thread(target=self._loop, name=f"nccl-workbook-progress-{rank}", daemon=True)
        self._thread.start()

    def post(self, key: str, value: str) -> None:
        """Publish ``<run_id>/<key>`` = ``value`` from the thread (the outbox keeps the newest 256)."""
        self._outbox.append((f"{self.run_id}/{key}", value))

    @property
    def connected(self) -> bool:
        """Whether the hub was reached (waits for nothing)."""
        return self._connected.is_set()

    def note_group(self, pg: str, timeout_s: float) -> None:
        """The tracer saw a process group for the first time (``Tracer.on_group``)."""
        self._state["pg_timeouts_s"][pg] = timeout_s
        self._dirty = True

    # called by the tracer (main thread, hot path)
    def on_event(self, row: Any) -> None:
        st = self._state
        kind, status = row.kind, row.status
        if status == "running":
            if kind == "collective":
                st["coll_op"], st["coll_pg"], st["coll_seq"], st["coll_since_ns"] = row.name, row.pg, row.seq, row.t_enqueue_ns
                st["entered"][row.pg] = row.seq
            elif kind == "region":
                st["region"], st["region_since_ns"] = row.name, row.t_enqueue_ns
            else:
                st["step"], st["step_since_ns"] = row.step, row.t_enqueue_ns
        else:
            if kind == "collective":
                if st.get("coll_pg") == row.pg and st.get("coll_seq") == row.seq:
                    st["coll_op"] = st["coll_pg"] = st["coll_seq"] = st["coll_since_ns"] = None
                if status == "ok":
                    st["completed"][row.pg] = max(st["completed"].get(row.pg, 0), row.seq)
                    if row.t_end_ns is not None:
                        self._lat.append(row.t_end_ns - row.t_enqueue_ns)
            elif kind == "region":
                st["region"] = st["region_since_ns"] = None
            else:
                st["step"] = st["step_since_ns"] = None
                if status == "ok":
                    st["steps_done"] += 1
                    if row.t_end_ns is not None:
                        self._step_times.append(row.t_end_ns - row.t_enqueue_ns)
        self._dirty = True

    def _snapshot(self) -> str:
        st = dict(self._state)
        st["entered"], st["completed"] = dict(st["entered"]), dict(st["completed"])
        st["pg_timeouts_s"] = dict(st["pg_timeouts_s"])
        st["t_ns"] = time.time_ns()
        if self._lat:
            st["coll_latency_median_ns"] = int(statistics.median(self._lat))
        if self._step_times:
            st["step_time_median_ns"] = int(statistics.median(self._step_times))
        return RankProgress(**st).to_json()

    def _loop(self) -> None:
        key = f"{self.run_id}/progress/{self.rank}"
        req_key = f"{self.run_id}/stack_request"
        try:
            self._store = connect_store(*self._address, master=False, timeout_s=self._connect_timeout_s)
        except Exception:  # noqa: BLE001 - no hub reachable: run without live detection
            return
        self._connected.set()
        if self._clock_sync:
            try:
                self._sync_clock()
            except Exception:  # noqa: BLE001 - no offset: times are taken as they are
                pass
        while not self._stop.is_set():
            try:
                while self._outbox:
                    self._store.set(*self._outbox.popleft())
                if self._dirty:
                    self._dirty = False
                    self._store.set(key, self._snapshot())
                if self._store.check([req_key]):
                    token = self._store.get(req_key)
                    if token != self._last_request:
                        self._last_request = token
                        self._store.set(f"{self.run_id}/stack/{self.rank}/{token.decode()}", self._main_stack())
            except Exception:  # noqa: BLE001 - the hub went away: stop publishing, never disturb the rank
                return
            self._stop.wait(PUBLISH_EVERY_S)

    def _sync_clock(self, rounds: int = 5, timeout_s: float = 1.0) -> None:
        best: tuple[int, int] | None = None  # (round trip, offset)
        for i in range(rounds):
            t0 = time.time_ns()
            self._store.set(f"{self.run_id}/ping/{self.rank}", f"{i}")
            pong = f"{self.run_id}/pong/{self.rank}/{i}"
            deadline = time.monotonic() + timeout_s
            while not self._store.check([pong]):
                if self._stop.is_set() or time.monotonic() > deadline:
                    return
                time.sleep(0.005)
            t1 = time.time_ns()
            hub_ns = int(self._store.get(pong))
            candidate = (t1 - t0, (t0 + t1) // 2 - hub_ns)
            best = candidate if best is None or candidate < best else best
        if best is not None:
            self._store.set(f"{self.run_id}/offset/{self.rank}", str(best[1]))

    def _main_stack(self) -> str:
        frame = sys._current_frames().get(self._main_ident)  # noqa: SLF001
        if frame is None:
            return "(main thread not found)"
        return short_paths("".join(traceback.format_stack(frame, limit=25)))

    def close(self) -> None:
        """Stop the thread; publish the last state and whatever :meth:`post` still holds."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        if self._store is not None and not self._thread.is_alive():
            try:
                while self._outbox:
                    self._store.set(*self._outbox.popleft())
                self._store.set(f"{self.run_id}/progress/{self.rank}", self._snapshot())
            except Exception:  # noqa: BLE001
                pass


def short_paths(text: str) -> str:
    """Drop install prefixes from file paths in a stack (``.../site-packages/torch/x.py`` ->
    ``torch/x.py``, ``.../lib/python3.11/multiprocessing/queues.py`` -> ``multiprocessing/queues.py``),
    so stacks read the same on every machine."""
    import os
    import re
    import sysconfig

    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    text = text.replace(pkg_parent, "")
    text = re.sub(r'File "[^"]*?(?:site|dist)-packages/', 'File "', text)
    stdlib = sysconfig.get_paths().get("stdlib")
    return text.replace(stdlib.rstrip(os.sep) + os.sep, "") if stdlib else text
