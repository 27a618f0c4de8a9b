"""What ``nccl-workbook watch`` found: a :class:`WatchReport` value, its JSON contract, its text.

The JSON (``--json PATH`` or ``--json -``)::

    {"command": [...], "exit_code": 1, "world_size": 4, "wall_s": 12.3,
     "ranks": [{"rank", "host", "pid", "status", "error", "steps"}],      # status: ok|timeout|peer_closed|error|crashed|killed
     "stalls": [{"op", "pg", "seq", "kind", "waiting_ranks", "culprit_ranks", "detected_after_s",
                 "resolved", "wait_s", "where": {"0": ...}, "stacks": {"0": ...}}],   # kind: late|missing|mismatch
     "first_failure": {"rank", "error"} | null,
     "culprit_ranks": [...]}

A stall's ``kind``: ``late`` (the missing ranks came later: it resolved by itself), ``missing``
(still missing when the job ended), ``mismatch`` (ranks at the same position called different ops).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nccl_workbook.status import short_error

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.diagnose import Diagnosis
    from nccl_workbook.observer import HangReport

__all__ = ["RankEnd", "WatchReport", "stall_json", "chrome_trace"]

#: how a watched rank ended, beyond the statuses of a workbook run
STATUSES = ("ok", "timeout", "peer_closed", "error", "crashed", "killed")


@dataclass(frozen=True)
class RankEnd:
    """One rank of a watched job, as it ended."""

    rank: int
    host: str | None
    pid: int | None
    status: str
    error: str | None
    steps: int
    t_end_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "host": self.host, "pid": self.pid, "status": self.status,
                "error": self.error, "steps": self.steps}


def stall_kind(h: HangReport) -> str:
    return "mismatch" if h.kind == "mismatch" else ("late" if h.resolved else "missing")


def stall_json(h: HangReport) -> dict[str, Any]:
    return {
        "op": h.op, "pg": h.pg, "seq": h.seq, "kind": stall_kind(h),
        "waiting_ranks": list(h.waiting_ranks), "culprit_ranks": list(h.culprit_ranks),
        "detected_after_s": round(h.detected_after_s, 3), "resolved": h.resolved,
        "wait_s": None if h.wait_s is None else round(h.wait_s, 3),
        "where": {str(k): v for k, v in sorted(h.where.items())},
        "stacks": {str(k): v for k, v in sorted(h.stacks.items())},
    }


@dataclass(frozen=True)
class WatchReport:
    command: tuple[str, ...]
    exit_code: int
    world_size: int | None
    wall_s: float
    ranks: tuple[RankEnd, ...]
    stalls: tuple[HangReport, ...]
    first_failure: tuple[int, str] | None
    culprit_ranks: tuple[int, ...]
    diagnosis: Diagnosis | None = field(default=None, compare=False)
    trace: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "command": list(self.command),
            "exit_code": self.exit_code,
            "world_size": self.world_size,
            "wall_s": round(self.wall_s, 3),
            "ranks": [r.to_json() for r in self.ranks],
            "stalls": [stall_json(h) for h in self.stalls],
            "first_failure": None if self.first_failure is None else {"rank": self.first_failure[0],
                                                                       "error": self.first_failure[1]},
            "culprit_ranks": list(self.culprit_ranks),
            "diagnosis": None if self.diagnosis is None else self.diagnosis.summary,
            "notes": list(self.notes),
        }

    def to_text(self) -> str:
        """One screen: how the job ended, who failed first, the culprits, the stalls, what to do."""
        out = [f"job ended with exit code {self.exit_code} after {self.wall_s:.1f} s "
               f"({self.world_size if self.world_size is not None else '?'} ranks seen)"]
        if self.first_failure is not None:
            out.append(f"first failure: rank {self.first_failure[0]}: {short_error(self.first_failure[1], 160)}")
        if self.culprit_ranks:
            out.append(f"culprit rank(s): {', '.join(map(str, self.culprit_ranks))}"
                       + (f" ({self.diagnosis.message})" if self.diagnosis is not None and self.diagnosis.message else ""))
        for h in self.stalls:
            out.append(stall_line(h))
        for r in self.ranks:
            err = f"  {short_error(r.error, 100)}" if r.error else ""
            out.append(f"  rank {r.rank} ({r.host}, pid {r.pid}): {r.status:<11} steps={r.steps}{err}")
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out)


def stall_line(h: HangReport) -> str:
    who = ", ".join(map(str, h.culprit_ranks))
    waiting = ", ".join(map(str, h.waiting_ranks))
    if h.kind == "mismatch":
        head = f"mismatch at {h.op} (pg {h.pg}, seq {h.seq}): rank(s) {who} called another op"
    else:
        head = (f"rank{'s' if len(h.waiting_ranks) > 1 else ''} {waiting} waited in {h.op} (pg {h.pg}, seq {h.seq}) "
                f"for rank{'s' if len(h.culprit_ranks) > 1 else ''} {who}")
    tail = (f"resolved: the wait lasted {h.wait_s:.1f} s" if h.resolved and h.wait_s is not None
            else "unresolved: still waiting when the job ended")
    return f"stall: {head}; named {h.detected_after_s:.1f} s into the wait; {tail}"


def chrome_trace(trace: pd.DataFrame) -> dict[str, Any]:
    """The trace as a Chrome/Perfetto trace (open it at ui.perfetto.dev): one process per rank, one
    complete event per step, region and collective (microseconds from the first event); rows that
    never ended last until the end of the trace."""
    events: list[dict[str, Any]] = []
    if trace is None or len(trace) == 0:
        return {"traceEvents": events, "displayTimeUnit": "ms"}
    t0 = int(trace["t_enqueue_ns"].min())
    t_last = int(max(trace["t_enqueue_ns"].max(), trace["t_end_ns"].max(skipna=True) if trace["t_end_ns"].notna().any() else 0))
    lanes = {"step": 0, "region": 1, "collective": 2}
    for rank in sorted(int(r) for r in trace["rank"].unique()):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        for kind, tid in lanes.items():
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": kind}})
    for row in trace.itertuples(index=False):
        start = int(row.t_enqueue_ns)
        end = int(row.t_end_ns) if row.t_end_ns is not None and str(row.t_end_ns) != "<NA>" else t_last
        name = str(row.name) if row.kind != "step" else f"step {row.step}"
        args = {"status": str(row.status)}
        if row.kind == "collective":
            args.update(pg=str(row.pg), seq=int(row.seq))
            if str(row.numel) != "<NA>":
                args["numel"] = int(row.numel)
        events.append({"ph": "X", "name": name, "cat": str(row.kind), "pid": int(row.rank), "tid": lanes[str(row.kind)],
                       "ts": (start - t0) / 1e3, "dur": max(end - start, 0) / 1e3, "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def dumps(report: WatchReport) -> str:
    return json.dumps(report.to_json(), indent=2)
