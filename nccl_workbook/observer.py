"""The observer: watches the ranks of one run from outside, names a stall while it happens, and
recovers what a dead rank had recorded. It knows nothing of ipyparallel: a cluster run and a
``watch`` of a user's torchrun job use it the same way.

The parts:

- :class:`ProgressHub`: the ``TCPStore`` server the ranks' :class:`~nccl_workbook.live.ProgressPublisher`
  threads publish to; reads their states, asks them for their main thread's stack.
- :func:`detect_hang`: the rule, as a pure function of the ranks' states: some ranks have been waiting
  in the same collective (process group, sequence number) for longer than a threshold that adapts to
  the job (``max(min_wait_s, latency_factor x`` the ranks' median collective latency``)``) while
  other ranks have not entered it. Those others are the suspects (a :class:`HangReport`); ranks at
  the same position in another op are a mismatch.
- :class:`RunObserver`: one run's watcher. ``poll()`` applies the rule, takes every rank's stack on
  a detection, notices a stall resolving (every waiting rank completed the collective) and then
  watches for the next; every stall is kept in ``stalls``. ``recover_rows`` reads back the rows a rank
  spilled to its file (its process died, so they did not come back with it) and ends its open rows
  at the moment it died (:func:`nccl_workbook.trace.close_open_rows`).

A detection is a *suspicion*: a legitimately long wait (a fix that waits on a side group) looks the
same until it ends, which is why a stall is reported as ``resolved`` (it ended by itself: a delay,
not a hang) or ``unresolved`` (still waiting when the run ended: the hang the timeout then reports).

Usage::

    hub = ProgressHub()                                   # once per watching process
    obs = RunObserver(world_size=4, hub=hub, spill_dir=folder)
    # start the ranks with obs.publisher_spec() and obs.spill_path(rank) ...
    while ranks_running:
        obs.poll()                                        # returns a stall when one is named
    obs.finish()
    obs.stalls                                            # every stall of the run, in order
"""

from __future__ import annotations

import html
import logging
import shutil
import socket
import statistics
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from nccl_workbook.live import RankProgress, connect_store
from nccl_workbook.trace import TraceRow, close_open_rows, read_spill

__all__ = ["HangReport", "ProgressHub", "RunObserver", "detect_hang"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HangReport:
    """A stall: ranks waiting in a collective that others have not entered, named while it lasts."""

    op: str
    pg: str
    seq: int
    waiting_ranks: tuple[int, ...]
    culprit_ranks: tuple[int, ...]
    #: seconds from the first rank entering the collective (the stall's onset) to this detection
    detected_after_s: float
    onset_ns: int
    detected_ns: int
    #: rank -> where the rank was at detection time
    where: dict[int, str]
    kind: str = "late"  # "late" | "mismatch" | "cross_group"
    #: rank -> Python stack of the rank's main thread at detection
    stacks: dict[int, str] = field(default_factory=dict)
    #: the waiting ranks all completed the collective later: it was a delay, not a hang
    resolved: bool = False
    #: when it resolved (wall-clock ns), for how long the first rank waited
    resolved_ns: int | None = None
    #: for a wait across process groups: where the missing ranks wait instead
    detail: str = ""

    @property
    def wait_s(self) -> float | None:
        """How long the stall lasted (onset to resolution); None while unresolved."""
        return None if self.resolved_ns is None else (self.resolved_ns - self.onset_ns) / 1e9

    @property
    def state(self) -> str:
        """``resolved after N s`` (the waiting ranks got through: a delay) or ``unresolved`` (still
        waiting when the run ended: a hang)."""
        if not self.resolved:
            return "unresolved: still waiting when the run ended"
        return "resolved: the wait ended by itself" + (f" after {self.wait_s:.1f} s" if self.wait_s is not None else "")

    @property
    def message(self) -> str:
        who = ", ".join(map(str, self.culprit_ranks))
        if self.kind == "mismatch":
            return (f"ranks disagree at {self.op} (pg {self.pg}, seq {self.seq}): suspect rank(s) {who}; "
                    f"named {self.detected_after_s:.1f} s after onset ({self.state})")
        across = f" ({self.detail})" if self.detail else ""
        return (f"ranks {list(self.waiting_ranks)} waiting in {self.op} (pg {self.pg}, seq {self.seq}) for rank(s) {who}"
                f"{across}; named {self.detected_after_s:.1f} s after onset ({self.state})")

    def _repr_html_(self) -> str:
        from nccl_workbook.render import stacks_html

        return f"<p>{html.escape(self.message)}</p>" + stacks_html(self.stacks, self.where)

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op, "pg": self.pg, "seq": self.seq, "kind": self.kind,
            "waiting_ranks": list(self.waiting_ranks), "culprit_ranks": list(self.culprit_ranks),
            "detected_after_s": round(self.detected_after_s, 3), "where": {str(k): v for k, v in self.where.items()},
            "resolved": self.resolved, "wait_s": None if self.wait_s is None else round(self.wait_s, 3),
            "detail": self.detail,
        }


def detect_hang(
    states: dict[int, RankProgress],
    *,
    world_size: int,
    now_ns: int,
    min_wait_s: float = 1.0,
    latency_factor: float = 20.0,
    step_factor: float = 0.0,
) -> HangReport | None:
    """The rule from the module docstring, as a pure function of the ranks' states.

    A wait counts once it exceeds ``max(min_wait_s, latency_factor x the ranks' median collective
    latency, step_factor x their median step time)``: what is normal for this job is not a stall.
    Ranks that have not published anything yet count as not arrived.
    """
    waiting = {r: s for r, s in states.items() if s.coll_op is not None and s.coll_since_ns is not None}
    if not waiting:
        return None
    lat = [s.coll_latency_median_ns for s in states.values() if s.coll_latency_median_ns]
    steps = [s.step_time_median_ns for s in states.values() if s.step_time_median_ns]
    threshold_ns = int(max(min_wait_s, latency_factor * (statistics.median(lat) / 1e9 if lat else 0.0),
                           step_factor * (statistics.median(steps) / 1e9 if steps else 0.0)) * 1e9)
    # the collective whose earliest waiter has waited longest
    by_key: dict[tuple[str, int], list[int]] = {}
    for r, s in waiting.items():
        by_key.setdefault((str(s.coll_pg), int(s.coll_seq or 0)), []).append(r)
    since = {r: int(s.coll_since_ns) for r, s in waiting.items() if s.coll_since_ns is not None}
    (pg, seq), ranks = min(by_key.items(), key=lambda kv: min(since[r] for r in kv[1]))
    onset = min(since[r] for r in ranks)
    if now_ns - onset < threshold_ns:
        return None
    members = range(world_size)
    where = {r: (states[r].where(now_ns) if r in states else "has not published any progress") for r in members}
    ops = {waiting[r].coll_op for r in ranks}
    if len(ops) > 1:
        counts: dict[str, int] = {}
        for r in ranks:
            counts[str(waiting[r].coll_op)] = counts.get(str(waiting[r].coll_op), 0) + 1
        majority = max(counts, key=lambda k: (counts[k], k))
        odd = tuple(sorted(r for r in ranks if waiting[r].coll_op != majority))
        return HangReport(majority, pg, seq, tuple(sorted(ranks)), odd, (now_ns - onset) / 1e9, onset, now_ns, where,
                          kind="mismatch")

    def absent_from(key: tuple[str, int]) -> tuple[int, ...]:
        g, n = key
        return tuple(r for r in members if r not in by_key[key] and (r not in states or states[r].entered.get(g, 0) < n))

    absent = absent_from((pg, seq))
    if not absent:
        # everyone entered this collective at some point; a rank that already left it cannot be
        # holding it up, so this is not (yet) a stall we can attribute
        return None
    elsewhere = {(str(waiting[r].coll_pg), int(waiting[r].coll_seq or 0)) for r in absent
                 if r in waiting and str(waiting[r].coll_pg) != pg}
    if elsewhere and all(r in waiting for r in absent):
        return _across_groups(states, by_key, since, [(pg, seq), *sorted(elsewhere)], absent_from, now_ns, where)
    return HangReport(sorted(ops)[0], pg, seq, tuple(sorted(ranks)), absent, (now_ns - onset) / 1e9, onset, now_ns, where)


def _across_groups(states: dict[int, RankProgress], by_key: dict[tuple[str, int], list[int]], since: dict[int, int],
                   keys: list[tuple[str, int]], absent_from: Callable[[tuple[str, int]], tuple[int, ...]], now_ns: int,
                   where: dict[int, str]) -> HangReport:
    """Ranks wait in collectives of different groups, each for ranks that wait in another (notebook
    06: ranks 0, 1 in the main group's ALLGATHER for ranks 2, 3, which wait on a side group for 0, 1).
    Neither side will move; the wait that fails first is the one whose group's timeout runs out
    first, so its missing ranks are named: the post-mortem diagnosis of the failed collective names
    the same ones. Where no rank published its groups' timeouts, the wait that began first."""
    def deadline(key: tuple[str, int]) -> tuple[float, int]:
        onset = min(since[r] for r in by_key[key])
        timeouts = [s.pg_timeouts_s.get(key[0]) for s in states.values() if s.pg_timeouts_s.get(key[0])]
        return (onset + min(timeouts) * 1e9 if timeouts else float("inf"), onset)

    chosen = min(keys, key=deadline)
    others = [k for k in keys if k != chosen]
    onset = min(since[r] for r in by_key[chosen])
    waiting = tuple(sorted(by_key[chosen]))
    op = str(states[waiting[0]].coll_op)
    blocked = "; ".join(f"rank(s) {', '.join(map(str, sorted(by_key[k])))} wait in {states[by_key[k][0]].coll_op} "
                        f"(pg {k[0]}, seq {k[1]})" for k in others)
    return HangReport(op, chosen[0], chosen[1], waiting, absent_from(chosen), (now_ns - onset) / 1e9, onset, now_ns,
                      where, kind="cross_group",
                      detail=f"a wait across process groups: {blocked}, for ranks that wait in pg {chosen[0]}; "
                             f"pg {chosen[0]}'s collective fails first")


def _shifted(s: RankProgress, lead_ns: int) -> RankProgress:
    if not lead_ns:
        return s
    return replace(s, **{f: getattr(s, f) - lead_ns for f in ("t_ns", "step_since_ns", "region_since_ns", "coll_since_ns")
                         if getattr(s, f) is not None})


def _is_resolved(hang: HangReport, states: dict[int, RankProgress]) -> bool:
    """Every waiting rank completed the collective it waited in."""
    return all(states.get(r) is not None and states[r].completed.get(hang.pg, 0) >= hang.seq for r in hang.waiting_ranks)


class ProgressHub:
    """The watching process's end: hosts the store the ranks publish to, reads it, asks for stacks.
    One hub serves any number of runs (each run's keys carry its ``run_id``)."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((self.host, 0))  # an address that is not this machine's fails here, at once
        # port 0: the store listens on a port the kernel picks and holds it from then on (a port
        # picked free first and bound later can be taken in between)
        self._store = connect_store(self.host, 0, master=True)
        self.port = int(self._store.port)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def read(self, run_id: str, world_size: int) -> dict[int, RankProgress]:
        """rank -> its last published state (ranks that published nothing are absent)."""
        out: dict[int, RankProgress] = {}
        for r in range(world_size):
            k = f"{run_id}/progress/{r}"
            if self._store.check([k]):
                try:
                    out[r] = RankProgress.from_json(self._store.get(k))
                except (ValueError, TypeError):
                    continue
        return out

    def request_stacks(self, run_id: str, world_size: int, *, timeout_s: float = 1.5) -> dict[int, str]:
        """Ask every rank for its main thread's Python stack; wait up to ``timeout_s``."""
        token = str(time.time_ns())
        self._store.set(f"{run_id}/stack_request", token)
        keys = {r: f"{run_id}/stack/{r}/{token}" for r in range(world_size)}
        deadline = time.monotonic() + timeout_s
        stacks: dict[int, str] = {}
        while len(stacks) < world_size and time.monotonic() < deadline:
            for r, k in keys.items():
                if r not in stacks and self._store.check([k]):
                    stacks[r] = self._store.get(k).decode("utf-8", "replace")
            time.sleep(0.02)
        for r in range(world_size):
            stacks.setdefault(r, "(no answer: the rank's process or its publisher thread is not responding)")
        return stacks


class RunObserver:
    """Watches one run of ``world_size`` ranks; see the module docstring.

    ``hub``: where the ranks publish (None: no live detection, only the read-back). ``spill_dir``: a
    folder the ranks' tracers append their rows to (None: no read-back); the observer owns it and
    removes it in :meth:`close`. ``on_stall`` is called once per stall, when it is named.
    """

    def __init__(
        self,
        world_size: int,
        *,
        hub: ProgressHub | None = None,
        run_id: str | None = None,
        spill_dir: str | Path | None = None,
        min_wait_s: float = 1.0,
        step_factor: float = 0.0,
        on_stall: Callable[[HangReport], None] | None = None,
    ) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        self.world_size = world_size
        self.hub = hub
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None
        if self.spill_dir is not None:
            self.spill_dir.mkdir(parents=True, exist_ok=True)
        self.min_wait_s = min_wait_s
        self.step_factor = step_factor
        self.on_stall = on_stall
        #: every stall named during the run, oldest first; the last may still be open
        self.stalls: list[HangReport] = []
        #: rank -> its clock's lead over this process's (ns), subtracted from what it publishes
        self.offsets_ns: dict[int, int] = {}

    # -- what the ranks need -----------------------------------------------------------------
    def publisher_spec(self) -> tuple[str, int, str] | None:
        """(host, port, run_id) for the ranks' publishers; None when there is no hub."""
        return None if self.hub is None else (self.hub.host, self.hub.port, self.run_id)

    def spill_path(self, rank: int) -> str | None:
        """The file rank ``rank``'s tracer appends its rows to; None when there is no spill folder."""
        return None if self.spill_dir is None else str(self.spill_dir / f"rank{rank}.jsonl")

    # -- watching ----------------------------------------------------------------------------
    def states(self) -> dict[int, RankProgress]:
        """rank -> its last published state, its times on this process's clock."""
        states = {} if self.hub is None else self.hub.read(self.run_id, self.world_size)
        if self.offsets_ns:
            states = {r: _shifted(s, self.offsets_ns.get(r, 0)) for r, s in states.items()}
        return states

    @property
    def open_stall(self) -> HangReport | None:
        return self.stalls[-1] if self.stalls and not self.stalls[-1].resolved else None

    def poll(self, now_ns: int | None = None) -> HangReport | None:
        """One look at the ranks: mark the open stall resolved once it ended, or name a new one
        (with every rank's stack, passed to ``on_stall``). Returns the stall named now, if any."""
        if self.hub is None:
            return None
        states = self.states()
        now = now_ns if now_ns is not None else time.time_ns()
        current = self.open_stall
        if current is not None:
            if _is_resolved(current, states):
                self.stalls[-1] = replace(current, resolved=True, resolved_ns=now)
            return None
        found = detect_hang(states, world_size=self.world_size, now_ns=now, min_wait_s=self.min_wait_s,
                            step_factor=self.step_factor)
        if found is None or any((s.pg, s.seq) == (found.pg, found.seq) for s in self.stalls):
            return None
        found = replace(found, stacks=self.hub.request_stacks(self.run_id, self.world_size))
        self.stalls.append(found)
        log.info("stall: %s", found.message)
        if self.on_stall is not None:
            self.on_stall(found)
        return found

    def finish(self) -> tuple[HangReport, ...]:
        """A last look (a stall that ended in the last moments is marked resolved); the stalls."""
        current = self.open_stall
        if current is not None and self.hub is not None and _is_resolved(current, self.states()):
            self.stalls[-1] = replace(current, resolved=True, resolved_ns=time.time_ns())
        return tuple(self.stalls)

    # -- a dead rank's rows ------------------------------------------------------------------
    def recover_rows(self, rank: int, *, died: bool, peer_rows: Iterable[TraceRow], fallback_ns: int) -> tuple[TraceRow, ...]:
        """The rows rank ``rank`` spilled before its process died or was killed; with ``died``,
        its rows still open end, as ``crashed``, when it died (:func:`~nccl_workbook.trace.close_open_rows`,
        estimated from ``peer_rows``; else ``fallback_ns``)."""
        path = self.spill_path(rank)
        rows = read_spill(path) if path is not None else ()
        if rows and died:
            rows = close_open_rows(rows, peer_rows, fallback_ns=fallback_ns)
        return rows

    def close(self) -> None:
        """Remove the spill folder (the hub stays: it may serve the next run)."""
        if self.spill_dir is not None:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
