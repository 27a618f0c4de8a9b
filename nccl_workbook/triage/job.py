"""Reading a whole job from its events: who reported, who is missing, who fell behind, which op.

A collective timeout is reported by the ranks that *waited*; the rank they waited for usually
reports nothing, or reports something else first (an exception, a dead DataLoader worker). So the
job-level reading looks at what is absent as much as at what is present:

- ``ranks_reported``: ranks with at least one failure event;
- ``ranks_missing``: ranks of the job that reported no failure. The world size comes from the
  log when it says so (``1/4 clients joined``, the launcher's per-rank summary), else from the
  sizes of a timed-out all-gather or reduce-scatter (``NumelOut = NumelIn x group size``), and
  otherwise is the highest rank seen + 1, so a silent rank above every reporting rank cannot be
  seen: the summary says which basis it used;
- ``ranks_covered``: ranks with lines of their own in the log; ``ranks_absent`` the ranks of the
  job with none (not pasted, or they printed nothing), ``partial`` whether the log looks like a
  part of the job's output (one rank's lines, or at most half of its ranks; a silent rank among
  many that reported is evidence, not a gap), ``coverage`` the sentence that says so;
- ``ranks_behind``: ranks whose watchdog status shows they never enqueued the failing collective
  (``last enqueued work`` below the failing sequence number), or that timed out at a lower
  sequence number than the others in the same group (they issued fewer collectives);
- ``failed_op`` / ``failed_seq``: the collective the reporting ranks timed out in (for gloo, the
  ``distributed_c10d`` function in the traceback);
- ``earliest``: the first failure in the log (by glog timestamp when every failure has one).

Usage::

    summary = summarize(parse_log(text))
    summary.ranks_missing     # (0,)
    summary.failed_op         # 'ALLREDUCE'
    summary.ranks_frame()     # one row per rank
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.triage.events import FAILURE_KINDS, Event, EventKind, LogTally, SiteKind, TallyBuilder

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["LogRankState", "RankRow", "JobSummary", "summarize", "ALLGATHER_OPS", "REDUCE_SCATTER_OPS"]

ALLGATHER_OPS = frozenset({"ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED", "ALLGATHER_INTO_TENSOR_COALESCED"})
REDUCE_SCATTER_OPS = frozenset({"REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "REDUCE_SCATTER_TENSOR_COALESCED"})

#: world-size bases that come from the log itself (the others are a guess: the highest rank + 1)
_STATED_BASES: dict[str, str] = {
    "stated": "world size stated in the log",
    "launcher": "world size from the launcher's per-rank summary",
    "collective sizes": "the group's size from the timed-out collective's NumelIn and NumelOut",
}
#: the one wording for ranks of the job the log has no line from
_NOT_IN_LOG = "not in the log (not pasted, or printed nothing)"


class LogRankState(str, enum.Enum):
    """What one rank's first failure in a log says about it (not to be confused with
    :class:`nccl_workbook.results.RankStatus`, the outcome of a rank in a workbook run)."""

    #: waited in a collective until the timeout
    TIMEOUT = "timeout"
    #: its peer closed the connection (the peer is the one to look at)
    PEER_CLOSED = "peer_closed"
    #: its own code, data loader, CUDA or NCCL failed
    ERROR = "error"
    #: the watchdog / heartbeat monitor itself was stuck
    STUCK = "stuck"
    #: the store / rendezvous timed out, or a connection could not be set up
    STORE = "store"
    #: stopped from outside (Ctrl-C, the launcher's signal) before anything failed on it: its
    #: traceback shows where it was (``RankRow.site``)
    INTERRUPTED = "interrupted"
    #: reported no failure, and its watchdog status shows it never reached the failing collective
    BEHIND = "behind"
    #: part of the job but reported no failure
    SILENT = "silent"


_STATUS_OF_KIND: dict[EventKind, LogRankState] = {
    EventKind.COLLECTIVE_TIMEOUT: LogRankState.TIMEOUT,
    EventKind.PG_STATUS: LogRankState.TIMEOUT,
    EventKind.MONITORED_BARRIER: LogRankState.TIMEOUT,
    EventKind.PEER_CLOSED: LogRankState.PEER_CLOSED,
    EventKind.WATCHDOG_STUCK: LogRankState.STUCK,
    EventKind.HEARTBEAT: LogRankState.STUCK,
    EventKind.STORE_TIMEOUT: LogRankState.STORE,
    EventKind.CONNECT_FAILED: LogRankState.STORE,
    EventKind.INTERRUPTED: LogRankState.INTERRUPTED,
}

# kinds that say "this rank itself went wrong" (as opposed to waiting for someone)
_ERROR_KINDS = frozenset(
    {
        EventKind.PYTHON_EXCEPTION,
        EventKind.DATALOADER_TIMEOUT,
        EventKind.DATALOADER_WORKER_DIED,
        EventKind.TOO_MANY_OPEN_FILES,
        EventKind.CUDA_ERROR,
        EventKind.NCCL_ERROR,
        EventKind.DUPLICATE_GPU,
        EventKind.UNUSED_PARAMETERS,
        EventKind.COLLECTIVE_MISMATCH,
    }
)

_STATUS_KINDS = frozenset({EventKind.PG_STATUS, EventKind.FLIGHT_RECORDER})  # carry enqueued/completed


@dataclass(frozen=True)
class RankRow:
    """One rank's part in the failure."""

    rank: int
    status: LogRankState
    #: the kind and line of the rank's first failure (``None`` when silent)
    first_kind: EventKind | None
    first_line: int | None
    op_type: str | None
    seq_num: int | None
    numel_in: int | None
    timeout_ms: int | None
    ran_for_ms: int | None
    pg_id: int | None
    last_enqueued: int | None
    last_completed: int | None
    n_events: int
    detail: str
    #: where the rank's last traceback puts it: ``data: loader.py:12 in __getitem__`` (or None)
    site: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "status": self.status.value,
            "first_kind": self.first_kind.value if self.first_kind else None,
            "first_line": self.first_line,
            "op_type": self.op_type,
            "seq_num": self.seq_num,
            "numel_in": self.numel_in,
            "timeout_ms": self.timeout_ms,
            "ran_for_ms": self.ran_for_ms,
            "pg_id": self.pg_id,
            "last_enqueued": self.last_enqueued,
            "last_completed": self.last_completed,
            "n_events": self.n_events,
            "detail": self.detail,
            "site": self.site,
        }


@dataclass(frozen=True)
class JobSummary:
    """The job-level reading of a log (see the module docstring for each field's meaning)."""

    #: every event of the log (counted also past the parser's event cap)
    n_events: int
    ranks_reported: tuple[int, ...]
    ranks_seen: tuple[int, ...]
    world_size: int | None
    #: how ``world_size`` was found: ``stated`` / ``launcher`` / ``highest rank + 1`` / ``unknown``
    world_size_basis: str
    ranks_missing: tuple[int, ...]
    ranks_behind: tuple[int, ...]
    behind_reason: str
    failed_op: str | None
    failed_seq: int | None
    failed_numel: int | None
    timeout_ms: int | None
    #: first failure event in the log
    earliest: Event | None
    #: ranks named by a dump signal as the first to see the timeout
    first_detectors: tuple[int, ...]
    #: ranks torch itself named as late (monitored barrier, desync debug report)
    named_late: tuple[int, ...]
    per_rank: tuple[RankRow, ...]
    #: failure events whose rank the log does not say
    unranked_failures: int
    #: events the details (op, sequence numbers, first failures, causes) were read from: the first
    #: ``MAX_EVENTS`` of the log; below ``n_events`` when the log had more
    n_events_kept: int = 0
    #: ranks whose traceback puts them in another collective than most of the ranks that waited
    #: (rank 3 in ``barrier`` while ranks 0-2 wait in ``all_gather``: it skipped the all_gather),
    #: or in data loading / their own code while the others were inside a collective
    ranks_elsewhere: tuple[int, ...] = ()
    elsewhere_reason: str = ""
    #: where the ranks elsewhere were: ``collective`` (another collective), ``data`` (loading
    #: data) or ``code`` (their own code), from their tracebacks; ``""`` when none
    elsewhere_kind: str = ""
    #: ranks with lines of their own in the log (a rank only named by another's message is not covered)
    ranks_covered: tuple[int, ...] = ()
    #: the log looks like a part of the job's output (see :func:`_is_partial`)
    partial: bool = False

    @property
    def world_size_stated(self) -> bool:
        """The world size comes from the log itself, not from the highest rank seen."""
        return self.world_size_basis in _STATED_BASES

    @property
    def ranks_absent(self) -> tuple[int, ...]:
        """Ranks of the job (as far as the log tells its size) with no line in the log."""
        if self.world_size is None or not self.ranks_covered:
            return ()
        return tuple(r for r in range(self.world_size) if r not in self.ranks_covered)

    def not_in_log(self) -> str:
        """``'ranks 0-2, 4-7 are not in the log (not pasted, or printed nothing)'``: how every part of
        the report names :attr:`ranks_absent` (``''`` when none is)."""
        absent = self.ranks_absent
        if not absent:
            return ""
        return f"{_who(absent)} {'is' if len(absent) == 1 else 'are'} {_NOT_IN_LOG}"

    @property
    def coverage(self) -> str:
        """Which ranks the log covers, of how many, and on what the count rests (one sentence)."""
        covered, world = self.ranks_covered, self.world_size
        if not covered:
            size = (f"the job had {world} ranks ({_STATED_BASES[self.world_size_basis]})" if self.world_size_stated
                    else "the log does not state the world size")
            return f"No line of this log says which rank printed it; {size}."
        if self.world_size_stated:
            if not self.ranks_absent:
                return f"This log covers {_all_of(covered, world)} ({_STATED_BASES[self.world_size_basis]})."
            return (f"This log covers {_who(covered)} of {world} ({_STATED_BASES[self.world_size_basis]}); "
                    f"{self.not_in_log()}.")
        if not self.ranks_absent:
            return f"This log covers {_who(covered)}; the log does not state the world size."
        return (f"This log covers {_who(covered)}; the log does not state the world size (at least {world}): "
                f"{self.not_in_log()}.")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (the ``summary`` of ``triage --json``)."""
        earliest = None
        if self.earliest is not None:
            e = self.earliest
            earliest = {"rank": e.rank, "kind": e.kind.value, "line_no": e.line_no, "op_type": e.op_type,
                        "seq_num": e.seq_num, "detail": e.detail, "timestamp": e.timestamp}
        return {
            "n_events": self.n_events,
            "n_events_kept": self.n_events_kept,
            "ranks_reported": list(self.ranks_reported),
            "ranks_seen": list(self.ranks_seen),
            "ranks_covered": list(self.ranks_covered),
            "ranks_absent": list(self.ranks_absent),
            "partial": self.partial,
            "coverage": self.coverage,
            "world_size": self.world_size,
            "world_size_basis": self.world_size_basis,
            "ranks_missing": list(self.ranks_missing),
            "ranks_behind": list(self.ranks_behind),
            "behind_reason": self.behind_reason,
            "failed_op": self.failed_op,
            "failed_seq": self.failed_seq,
            "failed_numel": self.failed_numel,
            "timeout_ms": self.timeout_ms,
            "earliest_failure": earliest,
            "first_detectors": list(self.first_detectors),
            "named_late": list(self.named_late),
            "ranks_elsewhere": list(self.ranks_elsewhere),
            "elsewhere_reason": self.elsewhere_reason,
            "elsewhere_kind": self.elsewhere_kind,
            "unranked_failures": self.unranked_failures,
            "per_rank": [row.to_json() for row in self.per_rank],
        }

    def ranks_frame(self) -> pd.DataFrame:
        """One row per rank (reported or missing), nullable ``Int64`` columns."""
        import pandas as pd

        columns = list(RankRow.__dataclass_fields__)
        frame = pd.DataFrame([row.to_json() for row in self.per_rank], columns=columns)
        for col in ("rank", "first_line", "seq_num", "numel_in", "timeout_ms", "ran_for_ms", "pg_id",
                    "last_enqueued", "last_completed", "n_events"):
            frame[col] = frame[col].astype("Int64")
        for col in ("status", "first_kind", "op_type", "detail"):
            frame[col] = frame[col].astype("string")
        return frame


def _mode(values: list[Any]) -> Any:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return Counter(values).most_common(1)[0][0]


def _earliest(failures: list[Event]) -> Event | None:
    if not failures:
        return None
    if all(e.timestamp for e in failures):
        # glog "E1206 18:44:12.715" has no year; month-day-time sorts within one year
        return min(failures, key=lambda e: (_stamp_key(e.timestamp or ""), e.line_no))
    return failures[0]


def _stamp_key(stamp: str) -> tuple[str, float]:
    parts = stamp[1:].split()
    day = parts[0].rjust(4, "0") if parts else ""
    seconds = 0.0
    if len(parts) > 1:
        try:
            h, m, s = parts[1].split(":")
            seconds = int(h) * 3600 + int(m) * 60 + float(s)
        except ValueError:
            seconds = 0.0
    return day, seconds


def summarize(events: list[Event] | tuple[Event, ...], tally: LogTally | None = None) -> JobSummary:
    """Events of one job -> :class:`JobSummary`. Works on an empty list (everything empty).

    ``tally``: the parser's counts over every event (:func:`~nccl_workbook.triage.parser.read_log`)
    when ``events`` is the capped list; then ranks and counts come from it, the details from
    ``events``. Without it, ``events`` is taken to be all of them.
    """
    events = list(events)
    if tally is None:
        tally = TallyBuilder.of(events)
    failures = [e for e in events if e.kind in FAILURE_KINDS]
    reported = list(tally.failure_ranks)
    seen = sorted({r for r, _ in tally.events_per_rank} | set(tally.named_ranks))

    timeouts = [e for e in events if e.kind is EventKind.COLLECTIVE_TIMEOUT]
    covered = tuple(r for r, _ in tally.events_per_rank)

    # world size: stated > launcher summary > collective sizes > highest rank + 1
    launcher = set(tally.launcher_ranks)
    highest = max(seen) + 1 if seen else 0
    group = _group_size(timeouts)
    if tally.stated_world_size is not None:
        world, basis = tally.stated_world_size, "stated"
    elif launcher and max(launcher) + 1 >= highest:
        world, basis = max(launcher) + 1, "launcher"
    elif group is not None and group >= highest:
        world, basis = group, "collective sizes"
    elif seen:
        world, basis = highest, "highest rank + 1"
    else:
        world, basis = None, "unknown"
    missing = tuple(r for r in range(world) if r not in reported) if world is not None and reported else ()

    # the failing collective: the most common (seq, op) among collective timeouts
    failed_seq = _mode([e.seq_num for e in timeouts])
    op_pool = [e for e in timeouts if failed_seq is None or e.seq_num == failed_seq] or timeouts
    failed_op = _mode([e.op_type for e in op_pool])
    if failed_op is None:
        failed_op = _mode([e.op_type for e in failures if e.op_type])
    failed_numel = _mode([e.numel_in for e in op_pool])
    timeout_ms = _mode([e.timeout_ms for e in timeouts if e.timeout_ms is not None])
    failed_pg = _mode([e.pg_id for e in events if e.kind is EventKind.PG_STATUS and e.seq_num == failed_seq])

    # per-rank status lines: last enqueued / completed for the failing group
    status_by_rank: dict[int, Event] = {}
    for e in events:
        if e.rank is None or e.kind not in _STATUS_KINDS or e.last_enqueued is None and e.last_completed is None:
            continue
        if failed_pg is not None and e.pg_id is not None and e.pg_id != failed_pg:
            continue
        status_by_rank[e.rank] = e

    behind: set[int] = set()
    reasons: list[str] = []
    if failed_seq is not None:
        never = sorted(r for r, e in status_by_rank.items()
                       if e.last_enqueued is not None and e.last_enqueued < failed_seq)
        if never:
            behind.update(never)
            reasons.append(f"rank(s) {_fmt(never)} never enqueued work {failed_seq} (last enqueued below it)")
    if failed_seq is None and status_by_rank:
        completed = {r: e.last_completed for r, e in status_by_rank.items() if e.last_completed is not None}
        if len(set(completed.values())) > 1:
            low = min(completed.values())
            laggards = sorted(r for r, c in completed.items() if c == low)
            behind.update(laggards)
            reasons.append(f"rank(s) {_fmt(laggards)} completed the least work ({low})")
    # ranks that timed out at a lower sequence number than others of the same group
    by_pg: dict[int | None, dict[int, int]] = {}
    for e in timeouts:
        if e.rank is not None and e.seq_num is not None:
            ranks = by_pg.setdefault(e.pg_id, {})
            ranks[e.rank] = min(e.seq_num, ranks.get(e.rank, e.seq_num))
    for pg, ranks in by_pg.items():
        if len(set(ranks.values())) > 1:
            low = min(ranks.values())
            laggards = sorted(r for r, s in ranks.items() if s == low)
            if len(laggards) < len(ranks):
                behind.update(laggards)
                reasons.append(
                    f"rank(s) {_fmt(laggards)} timed out at SeqNum {low} while others were at "
                    f"{max(ranks.values())}: they issued fewer collectives (or the ranks are in different groups)"
                )

    detectors = sorted({r for e in events if e.kind is EventKind.FLIGHT_RECORDER for r in e.named_ranks})
    named_late = sorted({r for e in events if e.kind in (EventKind.MONITORED_BARRIER, EventKind.DESYNC_REPORT)
                         for r in e.named_ranks})
    sites = _last_sites(events)
    elsewhere, elsewhere_reason = _ranks_elsewhere(timeouts)
    elsewhere_kind = SiteKind.COLLECTIVE.value if elsewhere else ""
    if not elsewhere:
        elsewhere, elsewhere_reason, elsewhere_kind = _ranks_outside_collectives(events, sites, failed_op)

    rows: list[RankRow] = []
    by_rank: dict[int, list[Event]] = {}
    for e in events:
        if e.rank is not None:
            by_rank.setdefault(e.rank, []).append(e)
    counts = dict(tally.events_per_rank)
    first_past_cap = {e.rank: e for e in tally.first_failures}
    all_ranks = sorted(set(reported) | set(missing) | set(counts))
    for rank in all_ranks:
        mine = by_rank.get(rank, [])
        mine_failures = [e for e in mine if e.kind in FAILURE_KINDS]
        if not mine_failures and rank in first_past_cap:
            mine_failures = [first_past_cap[rank]]  # all its events were past the event cap
        first = mine_failures[0] if mine_failures else None
        first_error = next((e for e in mine_failures if e.kind in _ERROR_KINDS), None)
        first_wait = next((e for e in mine_failures if e.kind in _STATUS_OF_KIND), None)
        if first is None:
            status = LogRankState.BEHIND if rank in behind else LogRankState.SILENT
        elif first_error is not None and (first_wait is None or first_error.line_no <= first_wait.line_no):
            status = LogRankState.ERROR  # this rank went wrong before (or without) waiting for anyone
        elif first_wait is not None:
            status = _STATUS_OF_KIND[first_wait.kind]
        else:
            status = LogRankState.ERROR
        timeout = next((e for e in mine if e.kind is EventKind.COLLECTIVE_TIMEOUT), None)
        stat = status_by_rank.get(rank)
        source = timeout or first
        detail = (first_error or first).detail if (first_error or first) else ""
        if first is None and mine:
            detail = "; ".join(dict.fromkeys(e.detail for e in mine if e.detail))[:200]
        rows.append(
            RankRow(
                rank=rank,
                status=status,
                first_kind=first.kind if first else None,
                first_line=first.line_no if first else None,
                op_type=source.op_type if source else None,
                seq_num=(source.seq_num if source and source.seq_num is not None
                         else stat.seq_num if stat else None),
                numel_in=source.numel_in if source else None,
                timeout_ms=source.timeout_ms if source else None,
                ran_for_ms=source.ran_for_ms if source else None,
                pg_id=(source.pg_id if source and source.pg_id is not None else stat.pg_id if stat else None),
                last_enqueued=stat.last_enqueued if stat else None,
                last_completed=stat.last_completed if stat else None,
                n_events=counts.get(rank, 0),
                detail=detail,
                site=f"{sites[rank][0].value}: {sites[rank][1]}" if rank in sites else None,
            )
        )

    return JobSummary(
        n_events=tally.n_events,
        n_events_kept=tally.n_kept,
        ranks_reported=tuple(reported),
        ranks_seen=tuple(seen),
        world_size=world,
        world_size_basis=basis,
        ranks_missing=missing,
        ranks_behind=tuple(sorted(behind)),
        behind_reason="; ".join(reasons),
        failed_op=failed_op,
        failed_seq=failed_seq,
        failed_numel=failed_numel,
        timeout_ms=timeout_ms,
        earliest=_earliest(failures),
        first_detectors=tuple(detectors),
        named_late=tuple(named_late),
        ranks_elsewhere=elsewhere,
        elsewhere_reason=elsewhere_reason,
        elsewhere_kind=elsewhere_kind,
        per_rank=tuple(rows),
        unranked_failures=tally.unranked_failures,
        ranks_covered=covered,
        partial=_is_partial(covered, world, basis),
    )


def _group_size(timeouts: list[Event]) -> int | None:
    """The group size the timed-out all-gathers / reduce-scatters imply (``NumelOut = NumelIn x size``,
    and the reverse), the most common one; ``None`` when no such timeout has both sizes."""
    sizes = []
    for e in timeouts:
        if not (e.numel_in and e.numel_out):
            continue
        big, small = ((e.numel_out, e.numel_in) if e.op_type in ALLGATHER_OPS
                      else (e.numel_in, e.numel_out) if e.op_type in REDUCE_SCATTER_OPS else (0, 1))
        if big >= 2 * small and big % small == 0:
            sizes.append(big // small)
    return _mode(sizes)


def _is_partial(covered: tuple[int, ...], world: int | None, basis: str) -> bool:
    """The log looks like a part of the job's output: one rank's lines (of a job with more ranks or
    of unknown size), or at most half of the job's ranks without a launcher summary of them all.

    One or two silent ranks among many that reported are not a partial log: silence is evidence
    (the late rank is often the one that printed nothing), and the full log of a job shows it.
    """
    if not covered:
        return False
    if len(covered) == 1:
        return world != 1 or basis not in _STATED_BASES  # a job of one rank only when the log says so
    if world is None or basis == "launcher":
        return False
    return 2 * len(covered) <= world


def _ranks_elsewhere(timeouts: list[Event]) -> tuple[tuple[int, ...], str]:
    """Ranks whose first timeout is in another collective than the one most ranks timed out in.

    Read from the op of each rank's first collective timeout that has no sequence number (gloo:
    the collective in its traceback; NCCL's numbered timeouts are compared by SeqNum instead, see
    ``ranks_behind``). Needs at least three ranks with a known op and a strict majority on one op:
    with two ranks, or a tie, the log cannot say which side is the odd one.
    """
    op_of: dict[int, str] = {}
    for e in timeouts:
        if e.rank is not None and e.op_type is not None and e.seq_num is None and e.rank not in op_of:
            op_of[e.rank] = e.op_type
    if len(op_of) < 3:
        return (), ""
    counts = Counter(op_of.values())
    if len(counts) < 2:
        return (), ""
    (major, n_major), (_, n_next) = counts.most_common(2)
    if n_major <= n_next or n_major * 2 <= len(op_of):
        return (), ""
    odd = tuple(sorted(r for r, op in op_of.items() if op != major))
    majority = sorted(r for r, op in op_of.items() if op == major)
    where = ", ".join(f"rank {r} in {op_of[r]}" for r in odd)
    return odd, (f"{where} while ranks {_fmt(majority)} waited in {major}: "
                 f"{'it' if len(odd) == 1 else 'they'} did not enter the {major} the others were in")


def _who(ranks: tuple[int, ...]) -> str:
    """``(3,)`` -> ``'rank 3'``, ``(0, 1, 2)`` -> ``'ranks 0-2'``."""
    if not ranks:
        return "a rank the log does not name"
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_fmt(ranks)}"


def _all_of(covered: tuple[int, ...], world: int | None) -> str:
    """``'all 4 ranks'`` / ``'rank 0 of 1'``: a log that covers every rank of the job."""
    return f"rank {covered[0]} of 1" if world == 1 else f"all {world} ranks"


def _last_sites(events: list[Event]) -> dict[int, tuple[SiteKind, str]]:
    """rank -> where its last traceback in the log puts it."""
    sites: dict[int, tuple[SiteKind, str]] = {}
    for e in events:
        if e.rank is not None and e.site_kind is not None and e.site is not None:
            sites[e.rank] = (e.site_kind, e.site)
    return sites


_SITE_WORDS = {SiteKind.DATA: "loading data", SiteKind.CODE: "in its own code"}


def _ranks_outside_collectives(events: list[Event], sites: dict[int, tuple[SiteKind, str]],
                               op: str | None) -> tuple[tuple[int, ...], str, str]:
    """Ranks whose traceback puts them in data loading or their own code while other ranks were
    inside a collective (Ctrl-C on a hung job prints every rank's traceback; a rank that raised
    has one too): they had not reached the collective the others waited in.

    Returns the ranks, the reason, and ``"data"`` / ``"code"`` (what most of them were doing).
    """
    waited = {e.rank for e in events if e.rank is not None and e.kind in _WAIT_WITH_OP and e.op_type}
    inside = {r for r, (kind, _) in sites.items() if kind is SiteKind.COLLECTIVE}
    inside |= {r for r in waited if r not in sites}
    outside = tuple(sorted(r for r, (kind, _) in sites.items() if kind is not SiteKind.COLLECTIVE and r not in waited))
    if not outside or not inside:
        return (), "", ""
    where = ", ".join(f"rank {r} {_SITE_WORDS[sites[r][0]]} ({sites[r][1]})" for r in outside)
    kinds = Counter(sites[r][0] for r in outside)
    kind = SiteKind.DATA if kinds[SiteKind.DATA] >= kinds[SiteKind.CODE] else SiteKind.CODE
    return outside, (f"{where} while {_who_waited(sorted(inside))} inside {op or 'a collective'}: "
                     f"{'it' if len(outside) == 1 else 'they'} had not reached the collective the others "
                     "waited in"), kind.value


_WAIT_WITH_OP = frozenset({EventKind.COLLECTIVE_TIMEOUT, EventKind.PEER_CLOSED})


def _who_waited(ranks: list[int]) -> str:
    return f"rank {ranks[0]} was" if len(ranks) == 1 else f"ranks {_fmt(ranks)} were"


def _fmt(ranks: list[int] | tuple[int, ...]) -> str:
    """``[0, 1, 2, 5]`` -> ``'0-2, 5'``."""
    ranks = sorted(ranks)
    out: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}" if j > i + 1 else f"{ranks[i]}, {ranks[j]}")
        i = j + 1
    return ", ".join(out)
