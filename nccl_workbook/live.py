"""Live hang detection: name the late rank and the collective while the group is still alive.

A rank blocked in a collective cannot answer ipyparallel, so each rank publishes its progress
another way: a :class:`ProgressPublisher` thread on the engine keeps the rank's current state (in
which step, which compute region, which collective since when, the last sequence number entered
and completed per process group) in a small TCP key-value store that the client hosts
(:class:`ProgressHub`, a ``torch.distributed.TCPStore`` server in the notebook/CLI process). The
tracer's hot path only updates a few attributes; the thread publishes at most every 50 ms, and
only when something changed.

The client polls the store and :func:`detect_hang` applies the rule: some ranks have been waiting
in the same collective (process group, sequence number) for longer than ``min_wait_s`` (and much
longer than the usual collective latency), while other ranks have not entered it. Those others
are the suspects, and their state says where they are (a compute region, a step, another
collective: a mismatch). On a detection the client asks every rank for the Python stack of its
main thread (taken by the publisher thread with ``sys._current_frames``, so it works while the
main thread is blocked in C++), and shows them side by side.

Detection is a *suspicion*: a legitimately long wait (a fix that waits on a side group) looks the
same until it ends. A report whose collective later completes on every waiting rank is marked
``resolved``.

Usage (the cluster does this for every run)::

    hub = ProgressHub()                       # client side
    ...                                       # ranks run ProgressPublisher(hub.address, run_id, rank)
    states = hub.read(run_id, world_size)
    report = detect_hang(states, world_size=4, now_ns=time.time_ns())
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

__all__ = [
    "RankProgress",
    "HangReport",
    "ProgressHub",
    "ProgressPublisher",
    "detect_hang",
    "py_spy_dump",
    "local_engine_pids",
    "short_paths",
    "stacks_html",
]

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


@dataclass(frozen=True)
class HangReport:
    """A suspected hang, named before the group's timeout fires."""

    op: str
    pg: str
    seq: int
    waiting_ranks: tuple[int, ...]
    culprit_ranks: tuple[int, ...]
    #: seconds from the first rank entering the collective (hang onset) to this detection
    detected_after_s: float
    onset_ns: int
    detected_ns: int
    #: rank -> where the rank was at detection time
    where: dict[int, str]
    kind: str = "late"  # "late" | "mismatch"
    #: rank -> Python stack of the rank's main thread at detection (filled in by the cluster)
    stacks: dict[int, str] = field(default_factory=dict)
    resolved: bool = False

    @property
    def message(self) -> str:
        who = ", ".join(map(str, self.culprit_ranks))
        state = "resolved later" if self.resolved else "unresolved"
        if self.kind == "mismatch":
            return (f"ranks disagree at {self.op} (pg {self.pg}, seq {self.seq}): suspect rank(s) {who}; "
                    f"named {self.detected_after_s:.1f} s after onset ({state})")
        return (f"ranks {list(self.waiting_ranks)} waiting in {self.op} (pg {self.pg}, seq {self.seq}) for rank(s) {who}; "
                f"named {self.detected_after_s:.1f} s after onset ({state})")

    def _repr_html_(self) -> str:
        import html

        return f"<p>{html.escape(self.message)}</p>" + stacks_html(self.stacks, where=self.where)

    def to_json(self) -> dict[str, object]:
        return {
            "op": self.op, "pg": self.pg, "seq": self.seq, "kind": self.kind,
            "waiting_ranks": list(self.waiting_ranks), "culprit_ranks": list(self.culprit_ranks),
            "detected_after_s": round(self.detected_after_s, 3), "where": {str(k): v for k, v in self.where.items()},
            "resolved": self.resolved,
        }


def detect_hang(
    states: dict[int, RankProgress],
    *,
    world_size: int,
    now_ns: int,
    min_wait_s: float = 1.0,
    latency_factor: float = 20.0,
) -> HangReport | None:
    """The rule from the module docstring, as a pure function of the ranks' states.

    A wait counts once it exceeds ``max(min_wait_s, latency_factor x the ranks' median collective
    latency)``. Ranks that have not published anything yet count as not arrived.
    """
    waiting = {r: s for r, s in states.items() if s.coll_op is not None and s.coll_since_ns is not None}
    if not waiting:
        return None
    lat = [s.coll_latency_median_ns for s in states.values() if s.coll_latency_median_ns]
    threshold_ns = int(max(min_wait_s, latency_factor * (statistics.median(lat) / 1e9 if lat else 0.0)) * 1e9)
    # the collective whose earliest waiter has waited longest
    by_key: dict[tuple[str, int], list[int]] = {}
    for r, s in waiting.items():
        by_key.setdefault((str(s.coll_pg), int(s.coll_seq or 0)), []).append(r)
    since = {r: int(s.coll_since_ns) for r, s in waiting.items() if s.coll_since_ns is not None}
    (pg, seq), ranks = min(by_key.items(), key=lambda kv: min(since[r] for r in kv[1]))
    onset = min(since[r] for r in ranks)
    if now_ns - onset < threshold_ns:
        return None
    ops = {waiting[r].coll_op for r in ranks}
    op = sorted(ops)[0]
    members = range(world_size)
    where = {r: (states[r].where(now_ns) if r in states else "has not published any progress") for r in members}
    # ranks at the same (pg, seq) but in a different op, or other ranks at the same seq with another op
    same_seq_other_op = [r for r, s in waiting.items() if (str(s.coll_pg), s.coll_seq) == (pg, seq) and s.coll_op != op]
    if len(ops) > 1 or same_seq_other_op:
        counts: dict[str, int] = {}
        for r in ranks:
            counts[str(waiting[r].coll_op)] = counts.get(str(waiting[r].coll_op), 0) + 1
        majority = max(counts, key=lambda k: (counts[k], k))
        odd = tuple(sorted(r for r in ranks if waiting[r].coll_op != majority))
        return HangReport(majority, pg, seq, tuple(sorted(ranks)), odd, (now_ns - onset) / 1e9, onset, now_ns, where, kind="mismatch")
    absent = tuple(
        r for r in members
        if r not in ranks and (r not in states or states[r].entered.get(pg, 0) < seq)
    )
    if not absent:
        # everyone entered this collective at some point; a rank that already left it cannot be
        # holding it up, so this is not (yet) a hang we can attribute
        return None
    # a rank that is itself waiting in a *later* collective of another group is not the cause of
    # this one only if it entered; ranks listed in `absent` never entered (pg, seq)
    return HangReport(op, pg, seq, tuple(sorted(ranks)), absent, (now_ns - onset) / 1e9, onset, now_ns, where)


def _store(host: str, port: int, *, master: bool, timeout_s: float = 10.0) -> Any:
    from torch.distributed import TCPStore

    return TCPStore(host, port, is_master=master, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s))


class ProgressHub:
    """Client side: hosts the store the ranks publish to, reads it, asks for stacks."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or "127.0.0.1"
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((self.host, 0))
            port = s.getsockname()[1]
        self.port = port
        self._store = _store(self.host, self.port, master=True)

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def read(self, run_id: str, world_size: int) -> dict[int, RankProgress]:
        keys = [f"{run_id}/progress/{r}" for r in range(world_size)]
        out: dict[int, RankProgress] = {}
        for r, k in enumerate(keys):
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


class ProgressPublisher:
    """Engine side: receives the tracer's events, publishes the rank's state, answers stack requests.

    ``on_event`` is cheap (attribute updates); the thread does the network I/O. Stops on
    :meth:`close` (always called by ``run_rank``)."""

    def __init__(self, address: tuple[str, int], run_id: str, rank: int) -> None:
        self.run_id, self.rank = run_id, rank
        self._state: dict[str, Any] = {"rank": rank, "t_ns": time.time_ns(), "entered": {}, "completed": {}, "steps_done": 0}
        self._lat: deque[int] = deque(maxlen=64)
        self._open: dict[int, tuple[str, str | None, int | None, int]] = {}
        self._dirty = True
        self._stop = threading.Event()
        self._main_ident = threading.main_thread().ident
        self._last_request: bytes | None = None
        try:
            self._store = _store(address[0], address[1], master=False, timeout_s=5.0)
        except Exception:  # noqa: BLE001 - no hub reachable: run without live detection
            self._store = None
        self._thread = threading.Thread(target=self._loop, name=f"nccl-workbook-progress-{rank}", daemon=True)
        if self._store is not None:
            self._thread.start()

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
        self._dirty = True

    def _snapshot(self) -> str:
        st = dict(self._state)
        st["entered"], st["completed"] = dict(st["entered"]), dict(st["completed"])
        st["t_ns"] = time.time_ns()
        if self._lat:
            st["coll_latency_median_ns"] = int(statistics.median(self._lat))
        return RankProgress(**st).to_json()

    def _loop(self) -> None:
        key = f"{self.run_id}/progress/{self.rank}"
        req_key = f"{self.run_id}/stack_request"
        while not self._stop.is_set():
            try:
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

    def _main_stack(self) -> str:
        frame = sys._current_frames().get(self._main_ident)  # noqa: SLF001
        if frame is None:
            return "(main thread not found)"
        return short_paths("".join(traceback.format_stack(frame, limit=25)))

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        if self._store is not None:
            try:
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


def stacks_html(stacks: dict[int, str], *, last_lines: int = 12, where: dict[int, str] | None = None) -> str:
    """Every rank's stack side by side (the innermost ``last_lines`` lines), as HTML."""
    import html

    cols = []
    for r in sorted(stacks):
        lines = stacks[r].rstrip().splitlines()[-last_lines:]
        head = f"<b>rank {r}</b>" + (f"<br><i>{html.escape(where[r])}</i>" if where and r in where else "")
        cols.append(f"<td style='vertical-align:top;text-align:left'>{head}<pre style='font-size:10px'>"
                    f"{html.escape(chr(10).join(lines))}</pre></td>")
    return f"<table><tr>{''.join(cols)}</tr></table>"


def local_engine_pids(profile_dir: str | None = None) -> dict[str, list[int]]:
    """cluster id -> pids of the ipyparallel engines on this host started under the workbook's
    state folder (or ``profile_dir``), found from their environment."""
    import psutil

    from nccl_workbook.cluster import state_dir

    from nccl_workbook._zygote import CMD_MARKER

    base = profile_dir or str(state_dir())
    found: dict[str, list[int]] = {}
    for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if CMD_MARKER in cmd:
                # an engine forked from the fork server shares its command line; the server is
                # the one whose parent is not a server
                if CMD_MARKER not in " ".join(psutil.Process(p.info["ppid"]).cmdline()):
                    continue
            elif "ipyparallel.engine" not in cmd or "nanny" in cmd:
                continue
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("IPP_PROFILE_DIR", "").startswith(base):
            found.setdefault(env.get("IPP_CLUSTER_ID", "?"), []).append(p.pid)
    return {k: sorted(v) for k, v in found.items()}


def py_spy_dump(pid: int, *, timeout_s: float = 10.0, native: bool = False) -> str:
    """``py-spy dump --pid PID``: a live process's Python (and with ``native``, C/C++) stacks,
    from outside the process. Needs permission to ptrace it (root, or the same user with
    ptrace_scope 0). Returns the text, or a one-line reason it could not."""
    import shutil
    import subprocess

    exe = shutil.which("py-spy") or (sys.prefix + "/bin/py-spy")
    cmd = [exe, "dump", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        return "(py-spy is not installed: pip install py-spy)"
    except subprocess.TimeoutExpired:
        return f"(py-spy did not answer within {timeout_s:g} s)"
    return out.stdout if out.returncode == 0 else f"(py-spy failed: {out.stderr.strip()[:300]})"
