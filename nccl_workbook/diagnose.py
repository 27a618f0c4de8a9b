"""Cross-rank matching: which rank was late or missing, in which collective, from the trace alone.

Collectives are matched across ranks by (process group, sequence number): every rank numbers the
collectives it calls on a group from 1, so the k-th call on one rank meets the k-th call on the
others. For the collective that failed, a rank is a *culprit* when it

- never called it (missing: it was elsewhere, raised, or died), or
- called it only after the waiting ranks' timeout had already run out (late), or
- called it with a different op, size or dtype than the others (mismatch; the minority is blamed, and
  every rank that reported when there is no majority).

The verdict is a value (:class:`Diagnosis`), never a log line or an exception.

Usage::

    d = diagnose(trace_df, statuses={0: RankStatus.PEER_CLOSED, 1: RankStatus.TIMEOUT, ...},
                 world_size=4, pg_timeout_s=3.0)
    d.verdict, d.culprit_ranks, d.failed_op   # Verdict.LATE_RANK, (0,), 'BARRIER'
    collective_table(trace_df)                # one row per matched collective, with arrival skew

Known limits: matching assumes each group's collectives are numbered from the same point on every
rank (true for runs traced from process-group init, as the workbook does). A rank whose report was
lost (its process died) has no rows: it shows as missing, which is what it was.
"""

from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from nccl_workbook.ops import op_from_traceback
from nccl_workbook.status import RankStatus

__all__ = [
    "Verdict",
    "Diagnosis",
    "diagnose",
    "collective_table",
    "op_from_traceback",
    "failed_collective_frame",
    "straggler_scores",
]


class Verdict(str, enum.Enum):
    OK = "ok"
    #: a rank reached the failed collective only after the others had timed out
    LATE_RANK = "late_rank"
    #: a rank never reached the failed collective
    MISSING_RANK = "missing_rank"
    #: ranks called different ops, sizes or dtypes at the same sequence number
    MISMATCH = "mismatch"
    #: no collective failed, but a rank raised or died
    RANK_FAILED = "rank_failed"
    #: the trace does not say
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Diagnosis:
    verdict: Verdict
    culprit_ranks: tuple[int, ...]
    failed_op: str | None
    failed_pg: str | None = None
    failed_seq: int | None = None
    late_ranks: tuple[int, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    #: seconds between the first and the last arrival at the failed collective (NaN if unknown)
    arrival_skew_s: float | None = None
    message: str = ""
    evidence: tuple[str, ...] = field(default=())

    @property
    def summary(self) -> dict[str, object]:
        return {
            "verdict": self.verdict.value,
            "culprit_ranks": list(self.culprit_ranks),
            "failed_op": self.failed_op,
            "failed_pg": self.failed_pg,
            "failed_seq": self.failed_seq,
            "late_ranks": list(self.late_ranks),
            "missing_ranks": list(self.missing_ranks),
            "arrival_skew_s": None if self.arrival_skew_s is None else round(self.arrival_skew_s, 3),
            "message": self.message,
        }


_FAILED = {"timeout", "peer_closed", "error", "running", "crashed"}


def collective_table(trace: pd.DataFrame) -> pd.DataFrame:
    """One row per (pg, seq): op (most common), ranks that arrived, first/last arrival (ns), the
    skew, the last rank to arrive, and whether it completed on every rank that arrived.

    >>> from nccl_workbook.trace import TraceRow, trace_frame
    >>> rows = [TraceRow(rank=r, kind="collective", name="BARRIER", pg="0", seq=1, t_enqueue_ns=t, t_end_ns=t2, status="ok")
    ...         for r, t, t2 in [(0, 5_000, 6_000), (1, 1_000, 6_000)]]
    >>> collective_table(trace_frame(rows))[["op", "ranks", "skew_ns", "last_rank"]].to_dict("records")
    [{'op': 'BARRIER', 'ranks': (0, 1), 'skew_ns': 4000, 'last_rank': 0}]
    """
    coll = trace[trace["kind"] == "collective"]
    out = []
    for (pg, seq), g in coll.groupby(["pg", "seq"], sort=True):
        g = g.sort_values("t_enqueue_ns")
        first, last = int(g["t_enqueue_ns"].iloc[0]), int(g["t_enqueue_ns"].iloc[-1])
        out.append(
            {
                "pg": pg,
                "seq": int(seq),
                "op": Counter(g["name"]).most_common(1)[0][0],
                "ranks": tuple(sorted(int(r) for r in g["rank"])),
                "first_arrival_ns": first,
                "last_arrival_ns": last,
                "skew_ns": last - first,
                "last_rank": int(g["rank"].iloc[-1]),
                "completed": bool((g["status"] == "ok").all()),
            }
        )
    cols = ["pg", "seq", "op", "ranks", "first_arrival_ns", "last_arrival_ns", "skew_ns", "last_rank", "completed"]
    return pd.DataFrame(out, columns=cols)


def failed_collective_frame(trace: pd.DataFrame, diagnosis: Diagnosis, world_size: int) -> pd.DataFrame:
    """Per rank, what happened at the failed collective: when it arrived and when it left
    (seconds after the first rank arrived), how long it waited, and how it ended. Ranks that never
    arrived have NaN times and status ``never arrived``.

    This is the "who waited for whom" table: the waiting ranks' ``waited_s`` equals the group
    timeout, the culprit arrives late or never.
    """
    cols = ["arrived_s", "left_s", "waited_s", "status"]
    if diagnosis.failed_seq is None or diagnosis.failed_pg is None:
        return pd.DataFrame(columns=cols).rename_axis("rank")
    at = trace[(trace["kind"] == "collective") & (trace["pg"] == diagnosis.failed_pg) & (trace["seq"] == diagnosis.failed_seq)]
    t0 = int(at["t_enqueue_ns"].min())
    rows = {}
    for r in range(world_size):
        g = at[at["rank"] == r]
        if len(g) == 0:
            rows[r] = {"arrived_s": float("nan"), "left_s": float("nan"), "waited_s": float("nan"), "status": "never arrived"}
            continue
        e, x = int(g["t_enqueue_ns"].iloc[0]), g["t_end_ns"].iloc[0]
        left = float("nan") if pd.isna(x) else (int(x) - t0) / 1e9
        rows[r] = {"arrived_s": round((e - t0) / 1e9, 3), "left_s": round(left, 3),
                   "waited_s": round(left - (e - t0) / 1e9, 3), "status": str(g["status"].iloc[0])}
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols).rename_axis("rank")


def straggler_scores(trace: pd.DataFrame, *, steps: tuple[int, int] | None = None, world_size: int | None = None) -> pd.DataFrame:
    """Per rank: how much of everyone else's waiting it caused, over a window of steps.

    For every collective that all its ranks reached, each rank waited from its own arrival until
    the last rank arrived; that wait is charged to the last rank. Summed over the window:

    - ``caused_wait_s``: seconds of other ranks' waiting charged to this rank;
    - ``score``: this rank's share of all charged waiting, from 0 to 1. How to read it: with 4 ranks
      and nobody special every rank scores about 0.25 (arrival order is noise); 0.9 means 90 % of
      all the waiting in the window was waiting for this rank, a straggler;
    - ``last_arrivals``: in how many collectives this rank arrived last;
    - ``wait_s``: seconds this rank itself spent waiting for others.

    ``steps=(first, last)`` limits the window to collectives issued in those training steps
    (inclusive). Collectives some rank never reached (a hang) are left out: that is
    :func:`diagnose`'s job.

    >>> from nccl_workbook.trace import TraceRow, trace_frame
    >>> rows = [TraceRow(rank=r, kind="collective", name="ALLREDUCE", pg="0", seq=s, step=s, numel=1, nbytes=4,
    ...                  t_enqueue_ns=t, t_end_ns=t + 10, status="ok")
    ...         for s in (1, 2) for r, t in [(0, 1_000_000_000 * s), (1, 1_000_000_000 * s + 500_000_000)]]
    >>> straggler_scores(trace_frame(rows))[["score", "caused_wait_s", "last_arrivals"]].to_dict("index")
    {0: {'score': 0.0, 'caused_wait_s': 0.0, 'last_arrivals': 0}, 1: {'score': 1.0, 'caused_wait_s': 1.0, 'last_arrivals': 2}}
    """
    coll = trace[trace["kind"] == "collective"]
    if steps is not None:
        coll = coll[coll["step"].between(steps[0], steps[1])]
    ranks = sorted(int(r) for r in trace["rank"].unique()) if world_size is None else list(range(world_size))
    caused = dict.fromkeys(ranks, 0)
    waited = dict.fromkeys(ranks, 0)
    last_count = dict.fromkeys(ranks, 0)
    for (pg, _seq), g in coll.groupby(["pg", "seq"], sort=False):
        members = set(int(r) for r in coll.loc[coll["pg"] == pg, "rank"])
        if set(int(r) for r in g["rank"]) != members or len(members) < 2:
            continue
        arrivals = {int(r): int(t) for r, t in zip(g["rank"], g["t_enqueue_ns"])}
        last_rank = max(arrivals, key=arrivals.__getitem__)
        t_last = arrivals[last_rank]
        for r, t in arrivals.items():
            waited[r] = waited.get(r, 0) + (t_last - t)
            caused[last_rank] = caused.get(last_rank, 0) + (t_last - t)
        last_count[last_rank] = last_count.get(last_rank, 0) + 1
    total = sum(caused.values())
    out = pd.DataFrame(
        {
            "score": [round(caused[r] / total, 4) if total else 0.0 for r in ranks],
            "caused_wait_s": [round(caused[r] / 1e9, 6) for r in ranks],
            "last_arrivals": [last_count[r] for r in ranks],
            "wait_s": [round(waited[r] / 1e9, 6) for r in ranks],
        },
        index=pd.Index(ranks, name="rank"),
    )
    return out


def diagnose(
    trace: pd.DataFrame,
    statuses: Mapping[int, RankStatus],
    *,
    world_size: int,
    pg_timeout_s: float,
    tracebacks: Mapping[int, str | None] | None = None,
) -> Diagnosis:
    """Find the failed collective and the ranks that caused it; see the module docstring."""
    if all(s is RankStatus.OK for s in statuses.values()) and len(statuses) == world_size:
        return Diagnosis(Verdict.OK, (), None, message="every rank completed")
    coll = trace[trace["kind"] == "collective"]
    failed = coll[coll["status"].isin(_FAILED)]
    waiting = failed[failed["rank"].map(lambda r: statuses.get(int(r)) is RankStatus.TIMEOUT)]
    pick = waiting if len(waiting) else failed
    if len(pick) == 0:
        return _no_collective_failed(statuses, tracebacks or {})
    # the collective the first timing-out rank was stuck in
    first = pick.sort_values("t_enqueue_ns").iloc[0]
    pg, seq = str(first["pg"]), int(first["seq"])
    at = coll[(coll["pg"] == pg) & (coll["seq"] == seq)].sort_values("t_enqueue_ns")
    members = sorted(set(int(r) for r in coll.loc[coll["pg"] == pg, "rank"])) if pg != "0" else list(range(world_size))
    if pg != "0":
        members = sorted(set(members) | {r for r in range(world_size) if r not in set(trace["rank"].astype(int))})
    arrived = {int(r): int(t) for r, t in zip(at["rank"], at["t_enqueue_ns"])}
    op = Counter(at["name"]).most_common(1)[0][0]
    evidence = [f"{pg=} seq={seq}: {len(arrived)}/{len(members)} ranks arrived"]

    # mismatch: ops, sizes or dtypes differ at the same sequence number
    sig = {
        int(r): (str(n), None if pd.isna(k) else int(k), None if pd.isna(d) else str(d))
        for r, n, k, d in zip(at["rank"], at["name"], at["numel"], at["dtype"])
    }
    if len(set(sig.values())) > 1:
        counts = Counter(sig.values()).most_common()
        majority = counts[0][0]
        show_dtype = len({s[2] for s in sig.values()}) > 1  # only when it is what differs
        desc = ", ".join(
            f"rank {r}: {s[0]}(numel={s[1]}" + (f", dtype={s[2]})" if show_dtype else ")") for r, s in sorted(sig.items())
        )
        if counts[0][1] == counts[1][1]:
            # no majority (two ranks, or survivors split evenly after a crash lost a rank's rows):
            # the trace cannot tell which side is odd, so name every rank that disagrees
            lost = [r for r in members if r not in sig]
            ops = {s[0] for s in sig.values()}
            return Diagnosis(
                Verdict.MISMATCH, tuple(sorted(sig)), ops.pop() if len(ops) == 1 else majority[0], pg, seq,
                message=f"collective mismatch at seq {seq} with no majority: {desc}; the trace cannot tell which "
                        f"side is odd" + (f" (rank(s) {', '.join(map(str, lost))} left no rows)" if lost else ""),
                evidence=tuple(evidence),
            )
        odd = tuple(sorted(r for r, s in sig.items() if s != majority))
        return Diagnosis(
            Verdict.MISMATCH, odd, majority[0], pg, seq, message=f"collective mismatch at seq {seq}: {desc}",
            evidence=tuple(evidence),
        )

    missing = tuple(r for r in members if r not in arrived)
    t_first = min(arrived.values())
    timeout_ns = int(pg_timeout_s * 1e9)
    late = tuple(sorted(r for r, t in arrived.items() if t >= t_first + timeout_ns))
    skew = (max(arrived.values()) - t_first) / 1e9
    if missing:
        evidence.append(f"never arrived: {list(missing)}")
    if late:
        evidence.append(
            "arrived after the others' timeout had run out: "
            + ", ".join(f"rank {r} (+{(arrived[r] - t_first) / 1e9:.2f} s)" for r in late)
        )
    culprits = tuple(sorted(set(missing) | set(late)))
    if not culprits and skew > 0.5 * pg_timeout_s:
        # nobody was later than the timeout, but one rank was far behind: name the last one
        last = max(arrived, key=arrived.__getitem__)
        culprits, late = (last,), (last,)
        evidence.append(f"rank {last} arrived last, {skew:.2f} s after the first")
    if not culprits:
        return Diagnosis(Verdict.UNKNOWN, (), op, pg, seq, arrival_skew_s=skew,
                         message=f"{op} (seq {seq}) failed but every rank arrived in time", evidence=tuple(evidence))
    verdict = Verdict.MISSING_RANK if missing and not late else Verdict.LATE_RANK
    who = ", ".join(map(str, culprits))
    if verdict is Verdict.MISSING_RANK and all(statuses.get(r) is RankStatus.CRASHED for r in missing):
        # a crashed rank's rows die with its process: absent from the trace is not "never called it"
        # (measured: gloo aborts the rank that receives fewer bytes than it expects, e.g. the one
        # rank that all-reduces bfloat16 while the others send float32)
        msg = (f"{op} (pg {pg}, seq {seq}) failed; rank(s) {who} crashed, and a crashed rank's trace dies "
               f"with its process, so whether it reached this collective (perhaps with another size or dtype) "
               f"is unknown")
    else:
        msg = (
            f"{op} (pg {pg}, seq {seq}) timed out waiting for rank(s) {who}: "
            + ("never called it" if verdict is Verdict.MISSING_RANK else f"arrived {skew:.2f} s after the first rank, "
               f"past the {pg_timeout_s:g} s timeout")
        )
    return Diagnosis(verdict, culprits, op, pg, seq, late, missing, skew, msg, tuple(evidence))


def _no_collective_failed(statuses: Mapping[int, RankStatus], tracebacks: Mapping[int, str | None]) -> Diagnosis:
    bad = tuple(sorted(r for r, s in statuses.items() if s in {RankStatus.ERROR, RankStatus.CRASHED}))
    ops = [op_from_traceback(tracebacks.get(r)) for r, s in statuses.items() if s is RankStatus.TIMEOUT]
    op = Counter(o for o in ops if o).most_common(1)[0][0] if any(ops) else None
    if bad:
        return Diagnosis(Verdict.RANK_FAILED, bad, op, message=f"rank(s) {', '.join(map(str, bad))} raised or died")
    return Diagnosis(Verdict.UNKNOWN, (), op, message="no failed collective in the trace and no rank error")
