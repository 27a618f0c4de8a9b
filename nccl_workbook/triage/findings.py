"""Likely causes of a failed job, ranked, each pointing at the notebook that reproduces it.

The knowledge is a table of rules (:data:`RULES`). Each rule is a small function over one
:class:`Evidence` value (computed once from the events and the job summary) and the findings of
the rules before it; it says why a scenario fits, on which ranks, with which confidence, and what
fixes it. Confidence is a score in [0, 1] shown as ``high`` (>= 0.8), ``medium`` (>= 0.5) or
``low``; the scores are the named constants below. When nothing in the log separates the late rank
from the ranks that waited for it, the top finding says so plainly (``scenario=None``) and names
the evidence to collect next. When the log is partial (``JobSummary.partial``: one rank's lines,
or at most half of the job's ranks), every finding is lowered one level after the rules ran, and
says so.

Scenario ids are stable. The notebook of a scenario comes from the scenario registry
(:func:`nccl_workbook.scenarios.get_scenario`), looked up when asked, so a scenario registered
later is found too; :data:`NAMED_SCENARIOS` lists the ids the rules can name.

Usage::

    findings = rank_causes(events, summarize(events))
    findings[0].scenario        # 'rank0-work-before-barrier'
    findings[0].notebook_path   # 'notebooks/01_rank0_work_before_barrier.ipynb'
    findings[0].culprit_ranks   # (0,)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from nccl_workbook.triage.events import Backend, Event, EventKind
from nccl_workbook.triage.job import ALLGATHER_OPS, JobSummary, _fmt, _who

__all__ = [
    "Confidence",
    "Evidence",
    "Finding",
    "NAMED_SCENARIOS",
    "RULES",
    "Rule",
    "notebook_for",
    "rank_causes",
    "scenario_notebooks",
]


def scenario_notebooks() -> dict[str, str]:
    """Scenario id -> notebook file name (in ``notebooks/``), from the scenario registry."""
    from nccl_workbook.scenarios import SCENARIOS

    return {sid: s.notebook for sid, s in SCENARIOS.items()}


def notebook_for(scenario: str) -> str:
    """``'fd-exhaustion'`` -> ``'05_fd_exhaustion.ipynb'``; unknown ids are a ``KeyError`` listing
    the known ones."""
    from nccl_workbook.scenarios import get_scenario

    return get_scenario(scenario).notebook


class Confidence(str, enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @classmethod
    def from_score(cls, score: float) -> Confidence:
        if score >= 0.8:
            return cls.HIGH
        if score >= 0.5:
            return cls.MEDIUM
        return cls.LOW


@dataclass(frozen=True)
class Finding:
    """One likely cause. ``scenario`` is ``None`` when no workbook scenario fits (or the log
    cannot decide); ``culprit_ranks`` are the ranks the evidence points at (may be empty)."""

    title: str
    scenario: str | None
    reason: str
    fix: str
    score: float
    culprit_ranks: tuple[int, ...] = ()
    evidence_lines: tuple[int, ...] = ()

    @property
    def confidence(self) -> Confidence:
        return Confidence.from_score(self.score)

    @property
    def notebook(self) -> str | None:
        """Notebook file name, e.g. ``'01_rank0_work_before_barrier.ipynb'`` (``None`` without a
        scenario, or for an id the registry does not know)."""
        if self.scenario is None:
            return None
        try:
            return notebook_for(self.scenario)
        except KeyError:
            return None

    @property
    def notebook_path(self) -> str | None:
        return f"notebooks/{self.notebook}" if self.notebook else None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "notebook": self.notebook_path,
            "title": self.title,
            "reason": self.reason,
            "confidence": self.confidence.value,
            "score": round(self.score, 2),
            "culprit_ranks": list(self.culprit_ranks),
            "fix": self.fix,
            "evidence_lines": list(self.evidence_lines),
        }


# --------------------------------------------------------------------------------------------
# evidence: what every rule reads, computed once
# --------------------------------------------------------------------------------------------

#: ops that reduce a value across ranks: where a scalar metric (loss, grad norm) travels
_REDUCE_OPS = frozenset({"ALLREDUCE", "ALLREDUCE_COALESCED", "REDUCE"})
#: at most this many elements: a scalar (loss, metric, barrier's 1-element all-reduce)
_SCALAR_NUMEL = 16
#: at least this many elements: gradient buckets
_GRADIENT_NUMEL = 100_000
#: more than this many elements in an all-gather: FSDP's parameter gathers fit too
_LARGE_GATHER_NUMEL = 1_000_000
#: a timeout that fired this many times later than its setting: the watchdog could not act
_LATE_WATCHDOG_FACTOR = 3

# scores (see Confidence): one name per rule and case
_FD_SCORE = 0.95
_FD_UNRANKED_WITH_TIMEOUTS = 0.85
_DATALOADER_FIRST = 0.9
_DATALOADER_AFTER_WAITS = 0.7
_MISMATCH_REPORTED = 0.95
_MISMATCH_FROM_TIMEOUTS = 0.7
_UNUSED_PARAMETERS = 0.95
_EXCEPTION_BEFORE_WAITS = 0.9
_EXCEPTION_WITH_WAITS = 0.75
_EXCEPTION_ALONE = 0.6
_EXCEPTION_UNRANKED_PENALTY = 0.15
_PEER_GONE_NAMED = 0.55
_PEER_GONE = 0.4
_STORE = 0.85
_STORE_NAMES_LATE_RANK = 0.9
_STORE_GONE = 0.6
_CONNECT_FAILED = 0.8
_ELSEWHERE = 0.85
_ELSEWHERE_OTHER_SCENARIO = 0.6
_LEFT_EARLY = 0.7
_ROOT_CAUSE_VICTIM = 0.45
_DUPLICATE_GPU = 0.95
_NCCL_ERROR = 0.7
_NCCL_ERROR_WITH_TIMEOUTS = 0.55
_RANK0_WORK_BARRIER = 0.75
_RANK0_WORK_SCALAR = 0.65
_RANK0_WORK_OTHER = 0.45
_RANK0_METRIC_SCALAR = 0.6
_RANK0_METRIC_UNSIZED = 0.35
#: rank 0 is only one of the ranks a partial log lacks: its absence says nothing about rank 0 itself,
#: so the rank-0 readings go below those that cover every absent rank
_RANK0_ONLY_ONE_ABSENT = 0.2
_UNEVEN_SIZES_DIFFER = 0.75
_UNEVEN_LARGE = 0.4
_UNEVEN = 0.6
_SLOW_RANK = 0.5
_WATCHDOG_STUCK = 0.5
_WATCHDOG_STUCK_WITH_TIMEOUTS = 0.35
_DATALOADER_TIMEOUT_NOT_BELOW = 0.7
_LATE_WATCHDOG = 0.45
_TORCH_NAMED_LATE = 0.8
#: below this best score the log cannot decide, and says so
_DECIDES = 0.5
_CANNOT_DECIDE = 0.3
_TIMEOUT_SETTING = 0.2
_NOTHING = 0.1
#: taken off every score when the log is partial: one level down, high (>= 0.8) to medium and medium
#: (>= 0.5) to low, since the levels are 0.2 and 0.3 wide; a low score stays low, above the floor
_PARTIAL_PENALTY = 0.3
_SCORE_FLOOR = 0.05

_WAIT_KINDS = (EventKind.COLLECTIVE_TIMEOUT, EventKind.PEER_CLOSED, EventKind.MONITORED_BARRIER,
               EventKind.WATCHDOG_STUCK, EventKind.HEARTBEAT)


def _ranks(events: Iterable[Event]) -> tuple[int, ...]:
    return tuple(sorted({e.rank for e in events if e.rank is not None}))


def _lines(events: Iterable[Event], limit: int = 5) -> tuple[int, ...]:
    return tuple(sorted({e.line_no for e in events})[:limit])


def _of(events: Iterable[Event], *kinds: EventKind) -> tuple[Event, ...]:
    return tuple(e for e in events if e.kind in kinds)


def _late_ranks(summary: JobSummary) -> tuple[int, ...]:
    """Ranks the others most likely waited for: named late, behind, or silent."""
    if summary.named_late:
        return summary.named_late
    if summary.ranks_behind:
        return summary.ranks_behind
    return summary.ranks_missing


def _late_clause(summary: JobSummary, ranks: tuple[int, ...], shown: str, role: str = "the late rank") -> str:
    """How a reason names the ranks it points at: ``shown`` (``{who}`` -> ``'rank 2'``) when the log has
    lines from each of them; else the one wording for ranks not in the log
    (:meth:`JobSummary.not_in_log`, the same rank list in every finding) and that ``role`` is likely
    among them, so a rank missing from a paste is never named as if the log showed it late."""
    absent = summary.ranks_absent
    seen = tuple(r for r in ranks if r not in absent)
    if len(seen) == len(ranks):
        return shown.format(who=_who(ranks))
    likely = (f"{role} may be among them" if seen else f"it is likely {role}" if len(absent) == 1
              else f"one of them is likely {role}")
    return (shown.format(who=_who(seen)) if seen else "") + f"; {summary.not_in_log()}: {likely}"


@dataclass(frozen=True)
class Evidence:
    """What the rules read: the events by kind and the job summary, computed once."""

    events: tuple[Event, ...]
    summary: JobSummary
    timeouts: tuple[Event, ...]
    #: events of ranks that waited for someone (timeouts, closed peers, stuck watchdogs)
    waits: tuple[Event, ...]
    waiting_ranks: tuple[int, ...]
    first_wait_line: int | None
    #: ranks the others most likely waited for (named late, behind, or silent)
    late: tuple[int, ...]
    open_files: tuple[Event, ...]
    dataloader: tuple[Event, ...]
    mismatches: tuple[Event, ...]
    unused: tuple[Event, ...]
    #: Python exceptions and CUDA errors
    raised: tuple[Event, ...]
    #: peers that closed a connection, the store's excepted
    closed: tuple[Event, ...]
    store: tuple[Event, ...]
    #: "Waiting in store based barrier" progress lines
    store_waiting: tuple[Event, ...]
    #: the store's connection lost (its server process is gone)
    store_gone: tuple[Event, ...]
    connect_failed: tuple[Event, ...]
    #: the launcher's exit summary, one event per rank (torchrun's "Failures" / "Root Cause")
    exits: tuple[Event, ...]
    duplicate_gpu: tuple[Event, ...]
    nccl: tuple[Event, ...]
    stuck: tuple[Event, ...]

    @classmethod
    def of(cls, events: Iterable[Event], summary: JobSummary) -> Evidence:
        events = tuple(events)
        waits = _of(events, *_WAIT_KINDS)
        return cls(
            events=events,
            summary=summary,
            timeouts=_of(events, EventKind.COLLECTIVE_TIMEOUT),
            waits=waits,
            waiting_ranks=_ranks(waits),
            first_wait_line=min((e.line_no for e in waits), default=None),
            late=_late_ranks(summary),
            open_files=_of(events, EventKind.TOO_MANY_OPEN_FILES),
            dataloader=_of(events, EventKind.DATALOADER_TIMEOUT, EventKind.DATALOADER_WORKER_DIED),
            mismatches=_of(events, EventKind.COLLECTIVE_MISMATCH),
            unused=_of(events, EventKind.UNUSED_PARAMETERS),
            raised=_of(events, EventKind.PYTHON_EXCEPTION, EventKind.CUDA_ERROR),
            closed=tuple(e for e in _of(events, EventKind.PEER_CLOSED) if e.backend is not Backend.STORE),
            store=_of(events, EventKind.STORE_TIMEOUT),
            store_waiting=_of(events, EventKind.STORE_WAITING),
            store_gone=tuple(e for e in _of(events, EventKind.PEER_CLOSED) if e.backend is Backend.STORE),
            connect_failed=_of(events, EventKind.CONNECT_FAILED),
            exits=tuple(e for e in _of(events, EventKind.PROCESS_EXIT) if e.rank is not None),
            duplicate_gpu=_of(events, EventKind.DUPLICATE_GPU),
            nccl=_of(events, EventKind.NCCL_ERROR),
            stuck=_of(events, EventKind.WATCHDOG_STUCK, EventKind.HEARTBEAT),
        )

    @property
    def op(self) -> str | None:
        return self.summary.failed_op

    @property
    def numel(self) -> int | None:
        return self.summary.failed_numel

    @property
    def own_failure(self) -> bool:
        """Some rank failed by itself (an exception, its data loader, its open files)."""
        return bool(self.raised or self.dataloader or self.open_files)


# --------------------------------------------------------------------------------------------
# the rules: (evidence, findings of the rules before) -> findings
# --------------------------------------------------------------------------------------------

Found = tuple[Finding, ...]


def _fd_exhaustion(ev: Evidence, _found: Found) -> Iterator[Finding]:
    fd = ev.open_files
    if not fd:
        return
    ranks = _ranks(fd)
    yield Finding(
        title="File descriptors ran out",
        scenario="fd-exhaustion",
        reason=(f"'Too many open files' on {_who(ranks)} (line {fd[0].line_no}): the process hit its "
                "open-file limit; a DataLoader then loses contact with its workers and that rank stops "
                "feeding the collectives" + (", which is why the others timed out" if ev.timeouts else "") + "."),
        fix=("Fewer DataLoader workers per rank (workers x ranks per host share the host's limits), raise "
             "the limit (`ulimit -n 65536` in the launcher's shell), or "
             "`torch.multiprocessing.set_sharing_strategy('file_system')`; "
             "`nccl-workbook doctor` checks workers x ranks against the limit."),
        score=_FD_SCORE if ranks or not ev.timeouts else _FD_UNRANKED_WITH_TIMEOUTS,
        culprit_ranks=ranks,
        evidence_lines=_lines(fd),
    )


def _dataloader_stall(ev: Evidence, _found: Found) -> Iterator[Finding]:
    dl = ev.dataloader
    if not dl:
        return
    ranks = _ranks(dl)
    before = ev.first_wait_line is None or dl[0].line_no <= ev.first_wait_line
    died = [e for e in dl if e.kind is EventKind.DATALOADER_WORKER_DIED]
    how = (f"a DataLoader worker died ({died[0].detail})" if died
           else f"the DataLoader timed out ({dl[0].timeout_ms // 1000 if dl[0].timeout_ms else '?'} s)")
    others = tuple(r for r in ev.waiting_ranks if r not in ranks)
    reason = f"On {_who(ranks)} {how} (line {dl[0].line_no})"
    if others:
        reason += (f"{' before' if before else ', and'} the other ranks ({_fmt(others)}) timed out waiting: "
                   "that rank stalled in its input pipeline, not in the collective")
    reason += "."
    if any("Killed" in e.detail for e in died):
        reason += " 'Killed' usually means the host's out-of-memory killer."
    if any("us error" in e.detail for e in died):
        reason += (" A bus error in a worker means shared memory (/dev/shm) ran out: raise it (docker "
                   "`--shm-size`, the pod's memory-backed /dev/shm) or use fewer workers / a smaller prefetch.")
    yield Finding(
        title="Input pipeline stalled on one rank",
        scenario="dataloader-stall",
        reason=reason,
        fix=("Give the DataLoader a `timeout=` well below the process-group timeout so the stall is "
             "reported as a DataLoader error on the rank that has it; find the slow or dead worker "
             "(memory, a hung file read); keep worker count and prefetch within the host's memory."),
        score=_DATALOADER_FIRST if before else _DATALOADER_AFTER_WAITS,
        culprit_ranks=ranks,
        evidence_lines=_lines(dl),
    )


def _odd_one_out(mismatches: tuple[Event, ...]) -> tuple[int, ...]:
    """The ranks whose (op, shape) fewer ranks share, when the reports disagree unevenly."""
    shapes = {e.rank: f"{e.op_type} {e.detail.split(';')[0]}" for e in mismatches if e.rank is not None}
    groups: dict[str, list[int]] = {}
    for rank, key in shapes.items():
        groups.setdefault(key, []).append(rank)
    if len(groups) < 2:
        return ()
    sizes = sorted(len(v) for v in groups.values())
    if sizes[0] == sizes[-1]:
        return ()
    return tuple(sorted(next(v for v in groups.values() if len(v) == sizes[0])))


def _collective_mismatch(ev: Evidence, _found: Found) -> Iterator[Finding]:
    mism = ev.mismatches
    if not mism:
        return
    odd = _odd_one_out(mism)
    named = {r for e in mism for r in e.named_ranks}
    decide = ("the odd one out is " + _who(odd)) if odd else "with two sides the log cannot tell which one is wrong"
    yield Finding(
        title="Ranks called different collectives",
        scenario="collective-mismatch",
        reason=(f"A collective mismatch was reported (line {mism[0].line_no}): {mism[0].detail or mism[0].op_type}. "
                f"Ranks disagree on the op, order or shapes of a collective; {decide}."),
        fix=("Make every rank call the same collectives in the same order with the same shapes "
             "(no rank-dependent `if` around a collective, pad per-rank tensors); keep "
             "TORCH_DISTRIBUTED_DEBUG=DETAIL on while debugging so a mismatch fails at once."),
        score=_MISMATCH_REPORTED,
        culprit_ranks=odd or tuple(sorted(set(_ranks(mism)) | named)),
        evidence_lines=_lines(mism),
    )


def _timeouts_disagree(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """Timeouts whose ranks report different ops at the same sequence number (no mismatch report)."""
    if ev.mismatches:
        return
    by_seq: dict[tuple[int | None, int], set[tuple[str | None, int | None]]] = {}
    for e in ev.timeouts:
        if e.seq_num is not None:
            by_seq.setdefault((e.pg_id, e.seq_num), set()).add((e.op_type, e.numel_in))
    clash = [(key, v) for key, v in by_seq.items() if len({op for op, _ in v}) > 1]
    if not clash:
        return
    (_pg, seq), variants = clash[0]
    yield Finding(
        title="Ranks timed out in different collectives at the same step",
        scenario="collective-mismatch",
        reason=(f"At SeqNum {seq} the ranks report different ops ({', '.join(sorted(str(o) for o, _ in variants))}): "
                "their sequences of collectives diverged."),
        fix="Make every rank issue the same collectives in the same order; run once with TORCH_DISTRIBUTED_DEBUG=DETAIL.",
        score=_MISMATCH_FROM_TIMEOUTS,
        evidence_lines=_lines(ev.timeouts),
    )


_OUTSIDE_READINGS = {
    # what the odd ranks were doing -> (title, scenario, why, fix), the most likely reading first
    "data": (
        ("A rank was still loading data while the others waited in a collective", "dataloader-stall",
         " Its input pipeline was slow or stuck (a slow or remote file system, a DataLoader worker that hangs, "
         "a dataset that blocks on a lock or a download).",
         "Find why that rank's data is slow (py-spy its DataLoader workers, check the file system); give the "
         "DataLoader a `timeout=` well below the group's timeout so a stalled read fails on its own rank, with "
         "its own traceback."),
    ),
    "code": (
        ("A rank was running its own code while the others waited in a collective", "rank0-work-before-barrier",
         " Work that only some ranks do (evaluation, sampling, logging, a checkpoint written by one rank) keeps "
         "them away from the next collective, the others wait there until the timeout.",
         "Make the others wait for it with a timeout that fits (a side group with a long timeout, or "
         "`nccl_workbook.fixes` for rank-0 work), or share the work across ranks; see the notebook."),
        ("A rank was slower than the others in the same work", "slow-rank-dynamic-shapes",
         " If every rank runs that code, the rank is slow at it (larger inputs, a slower device).",
         "Compare step times per rank; bucket or pad inputs so ranks do similar work."),
    ),
}


def _rank_outside(ev: Evidence) -> Iterator[Finding]:
    """Ranks whose tracebacks show them in data loading or their own code while others waited."""
    odd = ev.summary.ranks_elsewhere
    interrupted = _of(ev.events, EventKind.INTERRUPTED)
    stopped = (f" The job was stopped from outside (line {interrupted[0].line_no}: {interrupted[0].detail}); "
               "the tracebacks printed then show where each rank was." if interrupted else "")
    reason = f"Read together, the ranks' tracebacks put {ev.summary.elsewhere_reason}.{stopped}"
    for index, (title, scenario, why, fix) in enumerate(_OUTSIDE_READINGS[ev.summary.elsewhere_kind]):
        yield Finding(title=title, scenario=scenario, reason=reason + why, fix=fix,
                      score=_ELSEWHERE if index == 0 else _ELSEWHERE_OTHER_SCENARIO, culprit_ranks=odd,
                      evidence_lines=_lines(_of(ev.events, *_WAIT_KINDS, EventKind.INTERRUPTED)))


def _rank_elsewhere(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """The ranks' tracebacks disagree: one rank waits in another collective than the rest, or is in
    data loading / its own code while the others wait in a collective."""
    odd = ev.summary.ranks_elsewhere
    if not odd:
        return
    if ev.summary.elsewhere_kind in _OUTSIDE_READINGS:
        yield from _rank_outside(ev)
        return
    op = ev.op or "the collective"
    skipped_gather = ev.op in ALLGATHER_OPS
    reason = (f"Read together, the ranks' tracebacks put {ev.summary.elsewhere_reason}. {_who(odd).capitalize()} "
              f"skipped the {op} (or ran one collective fewer before it), so every rank waited for a partner "
              "that was somewhere else.")
    readings = (
        ("A rank skipped a collective the others entered", "uneven-eval-allgather", skipped_gather,
         " In evaluation this is the signature of uneven shards: the rank with fewer batches leaves the loop and "
         "reaches the next collective first.",
         "Give every rank the same number of steps (DistributedSampler with drop_last/padding, or "
         "`torch.distributed.algorithms.join.Join`); never skip a collective on some ranks."),
        ("Rank-dependent control flow around a collective", "collective-mismatch", not skipped_gather,
         " Outside evaluation, an `if` on the rank (or on per-rank data) around a collective does the same.",
         "Make every rank issue the same collectives in the same order; run once with "
         "TORCH_DISTRIBUTED_DEBUG=DETAIL to have torch name the mismatch at once."),
    )
    for title, scenario, leads, why, fix in sorted(readings, key=lambda r: not r[2]):
        yield Finding(title=title, scenario=scenario, reason=reason + why, fix=fix,
                      score=_ELSEWHERE if leads else _ELSEWHERE_OTHER_SCENARIO, culprit_ranks=odd,
                      evidence_lines=_lines(ev.timeouts))


def _rank_left_early(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """gloo peers saw a connection close, and the silent rank had no error: it left, not crashed."""
    closed = [e for e in ev.closed if e.backend is Backend.GLOO]
    if not closed or ev.own_failure or not ev.exits:
        return
    listed = {e.rank: e for e in ev.exits}
    closers = set(_ranks(ev.closed))
    silent = [r for r in ev.summary.ranks_missing if r not in closers]
    left = tuple(r for r in silent if r not in listed or "SIGTERM" in listed[r].detail
                 or "exitcode 0" in listed[r].detail)
    if not left:
        return
    how = ", ".join(f"rank {r}: " + ("not in the launcher's failures (it exited cleanly)" if r not in listed
                                     else "stopped by the launcher (SIGTERM) after the others failed")
                    for r in left)
    yield Finding(
        title="A rank left the collectives early",
        scenario="uneven-eval-allgather",
        reason=(f"{_who(_ranks(closed)).capitalize()} saw the connection to a peer close (line {closed[0].line_no}) "
                f"while {_who(left)} reported no error of its own ({how}): it left the collective sequence "
                "(finished its loop, destroyed its group) while the others still expected it, i.e. it ran fewer "
                "collectives than they did: uneven data shards or an early `break`/`return` on that rank."),
        fix=("Give every rank the same number of steps (DistributedSampler with drop_last/padding, "
             "`torch.distributed.algorithms.join.Join` for uneven inputs), and end with a `dist.barrier()` "
             "before `destroy_process_group()`."),
        score=_LEFT_EARLY,
        culprit_ranks=left,
        evidence_lines=_lines(closed),
    )


def _unused_parameters(ev: Evidence, _found: Found) -> Iterator[Finding]:
    unused = ev.unused
    if not unused:
        return
    ranks = tuple(sorted({r for e in unused for r in e.named_ranks} or set(_ranks(unused))))
    yield Finding(
        title="DDP: some parameters got no gradient",
        scenario="unused-parameters",
        reason=(f"DDP reported that reduction did not finish in the prior iteration (line {unused[0].line_no}): "
                "a parameter took no part in the loss on " + _who(ranks) + ", so its gradient bucket "
                "was never all-reduced there."),
        fix=("Make every parameter take part in the loss on every rank, or wrap with "
             "`DistributedDataParallel(..., find_unused_parameters=True)` (slower), or "
             "`static_graph=True` when the unused set never changes."),
        score=_UNUSED_PARAMETERS,
        culprit_ranks=ranks,
        evidence_lines=_lines(unused),
    )


def _exception_on_one_rank(ev: Evidence, _found: Found) -> Iterator[Finding]:
    raised = ev.raised
    if not raised:
        return
    ranks = _ranks(raised)
    first = raised[0]
    victims = tuple(r for r in ev.waiting_ranks if r not in ranks)
    before = ev.first_wait_line is None or first.line_no <= ev.first_wait_line
    score = (_EXCEPTION_BEFORE_WAITS if (victims and before) else _EXCEPTION_WITH_WAITS if victims
             else _EXCEPTION_ALONE)
    if not ranks:
        score -= _EXCEPTION_UNRANKED_PENALTY
    reason = f"{_who(ranks).capitalize()} raised {first.detail} (line {first.line_no})"
    if victims:
        reason += (f"; ranks {_fmt(victims)} then waited in a collective for it" if len(victims) > 1
                   else f"; rank {victims[0]} then waited in a collective for it")
        reason += " (with NCCL they wait for the whole timeout; with gloo they see the connection close)"
    reason += "."
    yield Finding(
        title="An exception on one rank left the others waiting",
        scenario="exception-on-one-rank",
        reason=reason,
        fix=("Fix the exception itself; and make a failing rank fail the job fast: catch it, log it, and "
             "call `dist.destroy_process_group()` (or abort) in a `finally`, so the other ranks do not "
             "sit in the collective until the timeout."),
        score=score,
        culprit_ranks=ranks,
        evidence_lines=_lines(raised),
    )


def _peer_went_away(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """Peers that closed (gloo) without any exception in the log."""
    closed = ev.closed
    if not closed or ev.own_failure:
        return
    closers = set(_ranks(closed))
    culprits = tuple(r for r in ev.late if r not in closers)
    yield Finding(
        title="A peer process went away",
        scenario="exception-on-one-rank",
        reason=(f"{_who(_ranks(closed)).capitalize()} saw the connection to a peer close (line {closed[0].line_no}): "
                f"{closed[0].detail}. The peer exited or destroyed its group"
                + (_late_clause(ev.summary, culprits, "; the likely peer: {who} (silent or behind)", "the peer")
                   if culprits else "")
                + ". Its own output (not in this log, or above the first error) says why."),
        fix="Find the first rank that failed and why (its traceback, `dmesg` for an OOM kill); see notebook 03 for failing fast.",
        score=_PEER_GONE_NAMED if culprits else _PEER_GONE,
        culprit_ranks=culprits,
        evidence_lines=_lines(closed),
    )


_RENDEZVOUS_FIX = ("Check that every node ran the launcher with the same world size and MASTER_ADDR/MASTER_PORT, "
                   "that the port is reachable (`nc -zv host port`), and the first failure on the missing node; "
                   "a stale process from a previous run can also hold the port.")
_LATE_TO_INIT_FIX = ("Make every rank reach `init_process_group` together: do slow per-rank preparation (data "
                     "download, tokenising, cache building) before the launcher starts the ranks, or after init on "
                     "every rank; or give init a longer `timeout=` than that preparation.")


def _rendezvous(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """Store timeouts: the job never got going. The most specific evidence speaks."""
    store = ev.store
    if not store:
        return
    reporters = set(_ranks(store))
    named = tuple(sorted({r for e in store for r in e.named_ranks if r not in reporters}))
    barrier = next((e for e in store + ev.store_waiting if e.arrived is not None and e.world_size is not None
                    and (e.store_key or "").startswith("store_based_barrier")), None)
    unique_id = next((e for e in store if e.detail.startswith("NCCL unique id")), None)
    joined = next((e for e in store if e.world_size is not None), None)
    connect = next((e for e in store if e.address is not None), None)
    if unique_id is not None:
        yield _unique_id_finding(ev, unique_id)
    elif named:
        yield _late_to_init_finding(ev, named, store)
    elif barrier is not None:
        yield _store_barrier_finding(ev, barrier)
    elif connect is not None and joined is None:
        yield _store_unreachable_finding(ev, connect)
    else:
        yield _store_generic_finding(ev, joined)


def _late_to_init_finding(ev: Evidence, late: tuple[int, ...], store: tuple[Event, ...]) -> Finding:
    waiting = _ranks(store)
    first = next(e for e in store if e.named_ranks)
    return Finding(
        title="A rank reached init_process_group too late",
        scenario="init-rendezvous-timeout",
        reason=(f"{_who(waiting).capitalize() if waiting else 'A rank'} timed out in the group's set-up waiting for "
                f"{_who(late)} (store key {first.store_key}, line {first.line_no}): {_who(late)} had not published "
                "its address, so it reached `init_process_group` later than the init timeout allows (slow "
                "preparation before init, a crash before it). The ranks that failed first are its victims."),
        fix=_LATE_TO_INIT_FIX,
        score=_STORE_NAMES_LATE_RANK,
        culprit_ranks=late,
        evidence_lines=_lines(store),
    )


def _store_barrier_finding(ev: Evidence, barrier: Event) -> Finding:
    world, arrived = barrier.world_size or 0, barrier.arrived or 0
    arrived_ranks = _ranks(e for e in ev.store + ev.store_waiting if e.arrived is not None)
    missing = tuple(r for r in range(world) if r not in arrived_ranks) if len(arrived_ranks) == arrived else ()
    return Finding(
        title="Ranks never arrived at init's store based barrier",
        scenario="init-rendezvous-timeout",
        reason=(f"The store based barrier of process-group init timed out (line {barrier.line_no}): {arrived} of "
                f"{world} ranks arrived, {world - arrived} never did"
                + (f" ({_who(missing)})" if missing else "") + ". A rank that is slow to reach "
                "`init_process_group` (data preparation, downloads before init), crashed before it, or runs with "
                "another world size or MASTER_ADDR/PORT keeps the others at the barrier until the init timeout."),
        fix=_LATE_TO_INIT_FIX + " Check the missing ranks' own output first.",
        score=_STORE,
        culprit_ranks=missing,
        evidence_lines=_lines(ev.store + ev.store_waiting),
    )


def _unique_id_finding(ev: Evidence, event: Event) -> Finding:
    return Finding(
        title="Rank 0 never published the NCCL unique id",
        scenario="init-rendezvous-timeout",
        reason=(f"{_who(_ranks([event])).capitalize()} could not read the NCCL unique id that rank 0 puts in the "
                f"store when the first NCCL communicator is created (line {event.line_no}; {event.detail}): rank 0 "
                "reached its first collective much later than the others (rank-0-only work before it: a login "
                "prompt, downloads, evaluation) or died."),
        fix=("Look at what rank 0 did before its first collective; keep rank-0-only work out of the way of the "
             "first collective, or make the others wait in a barrier with a long enough timeout."),
        score=_STORE,
        culprit_ranks=(0,),
        evidence_lines=_lines(ev.store),
    )


def _store_unreachable_finding(ev: Evidence, event: Event) -> Finding:
    return Finding(
        title="The store could not be reached",
        scenario=None,
        reason=(f"{_who(_ranks(ev.store)).capitalize()} timed out connecting to the TCPStore at {event.address} "
                f"(line {event.line_no}): nothing accepted the connection there in time. The master (rank 0, or "
                "torchrun's agent on the first node) was not started yet or had died, MASTER_ADDR/MASTER_PORT "
                "point elsewhere, or a firewall drops the port."),
        fix=_RENDEZVOUS_FIX,
        score=_STORE,
        culprit_ranks=(),
        evidence_lines=_lines(ev.store),
    )


def _store_generic_finding(ev: Evidence, joined: Event | None) -> Finding:
    store = ev.store
    if joined is not None:
        reason = (f"The store timed out with {joined.detail} (line {joined.line_no}): "
                  f"{_missing_clients(joined)} never connected. A rank that never started (a node that did "
                  "not launch, a crash at import, a wrong MASTER_ADDR/PORT or world size) keeps everyone at "
                  "the rendezvous.")
    else:
        reason = (f"{_who(_ranks(store)).capitalize()} timed out talking to the TCPStore ({store[0].detail}, line "
                  f"{store[0].line_no}): the master was unreachable or a peer never arrived.")
    return Finding(
        title="A rank never joined the rendezvous",
        scenario="init-rendezvous-timeout",
        reason=reason,
        fix=_RENDEZVOUS_FIX,
        score=_STORE,
        culprit_ranks=_ranks(store) if joined is None else (),
        evidence_lines=_lines(store),
    )


def _store_gone(ev: Evidence, _found: Found) -> Iterator[Finding]:
    gone = ev.store_gone
    if not gone:
        return
    yield Finding(
        title="The store's process went away",
        scenario=None,
        reason=(f"{_who(_ranks(gone)).capitalize()} lost the connection to the TCPStore (line {gone[0].line_no}: "
                f"{gone[0].detail}). The store's server lives in rank 0's process (env:// or tcp:// init) or in "
                "torchrun's agent: that process exited or crashed, so rank 0's (or the agent's) own output holds "
                "the cause. At the very end of a run that finished, this is only a teardown race."),
        fix=("Read rank 0's output (or the first node's agent) for its first error; make rank 0 the last to leave "
             "(`dist.barrier()` then `destroy_process_group()` on every rank before exit)."),
        score=_STORE_GONE,
        culprit_ranks=(0,),
        evidence_lines=_lines(gone),
    )


def _connect_failed(ev: Evidence, _found: Found) -> Iterator[Finding]:
    failed = ev.connect_failed
    if not failed:
        return
    first = failed[0]
    where = f" to {first.address}" if first.address else ""
    if first.backend is Backend.GLOO:
        why = ("gloo connects every pair of ranks while the group is set up, to the address each rank publishes: "
               "an address its peers cannot reach (a host name that resolves to 127.0.1.1 in /etc/hosts, the "
               "wrong network interface: set GLOO_SOCKET_IFNAME), a firewall between nodes, or a peer that died "
               "during set-up makes it fail.")
        fix = ("Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface the nodes share, check that each "
               "host name resolves to that interface's address, and open the ports between the nodes.")
    else:
        why = ("nothing accepted the connection: the store/rendezvous host (rank 0, or torchrun's agent on the "
               "first node) was not up yet or had died, MASTER_ADDR/MASTER_PORT point elsewhere, or a firewall "
               "refuses the port.")
        fix = _RENDEZVOUS_FIX
    yield Finding(
        title="Connections could not be set up",
        scenario=None,
        reason=(f"{_who(_ranks(failed)).capitalize()} could not connect{where} (line {first.line_no}: "
                f"{first.detail}): {why}"),
        fix=fix,
        score=_CONNECT_FAILED,
        culprit_ranks=(),
        evidence_lines=_lines(failed),
    )


def _duplicate_gpu(ev: Evidence, _found: Found) -> Iterator[Finding]:
    dup = ev.duplicate_gpu
    if not dup:
        return
    yield Finding(
        title="Two ranks on one GPU",
        scenario=None,
        reason=f"NCCL refused the communicator: {dup[0].detail} (line {dup[0].line_no}). NCCL needs one GPU per rank.",
        fix=("Call `torch.cuda.set_device(local_rank)` before `init_process_group` (or pass `device_id=`), "
             "and check CUDA_VISIBLE_DEVICES / the launcher's GPU binding."),
        score=_DUPLICATE_GPU,
        culprit_ranks=tuple(sorted({r for e in dup for r in ((e.rank,) if e.rank is not None else ()) + e.named_ranks})),
        evidence_lines=_lines(dup),
    )


def _nccl_error(ev: Evidence, _found: Found) -> Iterator[Finding]:
    nccl = ev.nccl
    if not nccl or ev.duplicate_gpu:
        return
    remote = any("Remote" in e.detail or "remote process" in e.detail for e in nccl)
    yield Finding(
        title="NCCL reported an error",
        scenario=None,
        reason=(f"{_who(_ranks(nccl)).capitalize()}: {nccl[0].detail} (line {nccl[0].line_no})."
                + (" A remote error means a peer process died or the network failed: the first rank to fail "
                   "elsewhere in the log (or on another node) is the one to read." if remote else
                   " This is a system/network/driver problem rather than a training-code hang.")),
        fix=("Run with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) to see the failing call; check the network "
             "interfaces (NCCL_SOCKET_IFNAME), InfiniBand health and driver/NCCL versions; "
             "an OOM-killed peer shows up as a remote error."),
        score=_NCCL_ERROR if not ev.timeouts else _NCCL_ERROR_WITH_TIMEOUTS,
        culprit_ranks=_ranks(nccl),
        evidence_lines=_lines(nccl),
    )


def _rank0_late(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """The classic: every other rank waited for rank 0. Two scenarios fit; the op and its size decide which
    leads, and whether a scalar metric fits at all (only a reduction of a scalar, or of an unknown size)."""
    s = ev.summary
    if not (ev.timeouts and 0 in ev.late and 0 not in ev.waiting_ranks):
        return
    op, numel = ev.op, ev.numel
    small = numel is not None and numel <= _SCALAR_NUMEL
    is_barrier = op == "BARRIER"
    what = f"{op or 'a collective'}" + (f" (SeqNum {s.failed_seq}" if s.failed_seq is not None else "")
    what += f", NumelIn={numel})" if numel is not None else ")" if s.failed_seq is not None else ""
    if 0 in s.ranks_absent:
        rank0 = f"; {s.not_in_log()}: if rank 0 is the late one, it was somewhere else."
    else:
        state = "reported nothing" if 0 in s.ranks_missing else "was behind"
        rank0 = f" while rank 0 {state}: rank 0 was somewhere else."
    base = f"{_who(ev.waiting_ranks).capitalize()} timed out in {what}{rank0}"
    note = (" NCCL runs barrier() as a 1-element ALLREDUCE, so NumelIn=1 cannot tell a barrier from a scalar "
            "metric all-reduce." if small and not is_barrier else "")
    guess = _RANK0_ONLY_ONE_ABSENT if s.partial and 0 in s.ranks_absent and len(s.ranks_absent) > 1 else 0.0
    yield Finding(
        title="Rank 0 did extra work while the others waited",
        scenario="rank0-work-before-barrier",
        reason=base + " Typical: rank-0-only work (checkpoint, sample generation, evaluation) before a barrier "
               "or collective the others already entered." + note,
        fix=("Keep rank-0-only work shorter than the timeout or make every rank wait outside collectives "
             "(do the work on all ranks, or let the others proceed and sync later); a longer "
             "`init_process_group(timeout=)` only hides it."),
        score=(_RANK0_WORK_BARRIER if is_barrier else _RANK0_WORK_SCALAR if small else _RANK0_WORK_OTHER) - guess,
        culprit_ranks=(0,),
        evidence_lines=_lines(ev.timeouts),
    )
    if not _may_carry_a_scalar(op, numel):
        return
    yield Finding(
        title="A slow metric/logging step on rank 0",
        scenario="slow-metrics-on-rank0",
        reason=base + " A scalar all-reduce (loss, grad norm, metric) that rank 0 reaches late because it "
               "computes or logs something slow (e.g. a norm over every parameter, wandb) fits too." + note,
        fix=("Compute metrics on every rank the same way and reduce them together; move slow logging off the "
             "step (every N steps, async/offline logging)."),
        score=(_RANK0_METRIC_SCALAR if small else _RANK0_METRIC_UNSIZED) - guess,
        culprit_ranks=(0,),
        evidence_lines=_lines(ev.timeouts),
    )


def _may_carry_a_scalar(op: str | None, numel: int | None) -> bool:
    """A reduction (or an op the log does not name) of a scalar's size, or of a size it does not say:
    where a loss or a metric travels. An all-gather, a broadcast or a gradient bucket never fits."""
    return (op is None or op in _REDUCE_OPS) and (numel is None or numel <= _SCALAR_NUMEL)


def _uneven_allgather(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """An all-gather with a missing or behind rank: uneven evaluation shards."""
    if not (ev.timeouts and ev.op in ALLGATHER_OPS and ev.late):
        return
    sizes = {e.numel_in for e in ev.timeouts if e.numel_in is not None}
    big = ev.numel is not None and ev.numel > _LARGE_GATHER_NUMEL
    yield Finding(
        title="Uneven work before an all-gather (evaluation)",
        scenario="uneven-eval-allgather",
        reason=(f"{_who(ev.waiting_ranks).capitalize()} timed out in {ev.op}"
                f"{_late_clause(ev.summary, ev.late, ' while {who} did not join')}. In evaluation this is the "
                "signature of uneven shards: one rank has more batches "
                "(or an extra step) and the others reach the gather first."
                + (f" The ranks even disagree on the size ({', '.join(map(str, sorted(sizes)))} elements)."
                   if len(sizes) > 1 else "")
                + (" (Large all-gathers are also FSDP's parameter gathers: check where it happened.)" if big else "")),
        fix=("Give every rank the same number of evaluation steps (DistributedSampler with drop_last/padding, "
             "or `torch.distributed.algorithms.join.Join`), and gather padded tensors of equal size."),
        score=_UNEVEN_SIZES_DIFFER if len(sizes) > 1 else _UNEVEN_LARGE if big else _UNEVEN,
        culprit_ranks=ev.late,
        evidence_lines=_lines(ev.timeouts),
    )


def _slow_rank(ev: Evidence, _found: Found) -> Iterator[Finding]:
    """One rank much slower in gradient all-reduces, with no error of its own."""
    if not (ev.timeouts and ev.op == "ALLREDUCE" and ev.numel is not None and ev.numel >= _GRADIENT_NUMEL
            and ev.late and 0 not in ev.late and not ev.own_failure):
        return
    yield Finding(
        title="One rank much slower in the backward pass",
        scenario="slow-rank-dynamic-shapes",
        reason=(f"{_who(ev.waiting_ranks).capitalize()} timed out in a gradient-sized ALLREDUCE (NumelIn={ev.numel})"
                f"{_late_clause(ev.summary, ev.late, ' while {who} did not get there')}. "
                + ("If its output shows no error" if set(ev.late) & set(ev.summary.ranks_absent)
                   else "With no error on that rank")
                + " it was slow, not dead: per-rank input sizes (sequence length, image size) that vary a lot make "
                "one rank's step much longer."),
        fix=("Bucket or cap input sizes so every rank gets similar work per step; measure per-rank step "
             "times (the tracer) to confirm; a longer timeout only hides it."),
        score=_SLOW_RANK,
        culprit_ranks=ev.late,
        evidence_lines=_lines(ev.timeouts),
    )


def _watchdog_stuck(ev: Evidence, _found: Found) -> Iterator[Finding]:
    stuck = ev.stuck
    if not stuck:
        return
    yield Finding(
        title="The NCCL watchdog itself was stuck",
        scenario="timeout-settings",
        reason=(f"{_who(_ranks(stuck)).capitalize()}: the heartbeat monitor saw no watchdog progress "
                f"(line {stuck[0].line_no}; {stuck[0].detail}). A CUDA/NCCL call hung, or another thread held "
                "the GIL; the process is then aborted after TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC."),
        fix=("Get stacks while it hangs (`py-spy dump --pid`), look for a rank stuck in a CUDA call or a "
             "deadlock; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if the hang is real work."),
        score=_WATCHDOG_STUCK if not ev.timeouts else _WATCHDOG_STUCK_WITH_TIMEOUTS,
        culprit_ranks=_ranks(stuck),
        evidence_lines=_lines(stuck),
    )


def _dataloader_timeout_not_below(ev: Evidence, _found: Found) -> Iterator[Finding]:
    pg_timeout = ev.summary.timeout_ms
    dl_events = _of(ev.dataloader, EventKind.DATALOADER_TIMEOUT)
    dl_timeouts = [e.timeout_ms for e in dl_events if e.timeout_ms]
    if not (pg_timeout and dl_timeouts and max(dl_timeouts) >= pg_timeout):
        return
    yield Finding(
        title="DataLoader timeout not below the process-group timeout",
        scenario="timeout-settings",
        reason=(f"The DataLoader timeout ({max(dl_timeouts) // 1000} s) is not below the process-group timeout "
                f"({pg_timeout // 1000} s): the collective times out first and blames the wrong place."),
        fix="Set `DataLoader(timeout=)` to well under `init_process_group(timeout=)`.",
        score=_DATALOADER_TIMEOUT_NOT_BELOW,
        evidence_lines=_lines(dl_events),
    )


def _late_watchdog(ev: Evidence, _found: Found) -> Iterator[Finding]:
    slow = [e for e in ev.timeouts
            if e.ran_for_ms and e.timeout_ms and e.ran_for_ms > _LATE_WATCHDOG_FACTOR * e.timeout_ms]
    if not slow:
        return
    e = slow[0]
    ran_ms, timeout_ms = e.ran_for_ms or 0, e.timeout_ms or 0  # both set: filtered above
    yield Finding(
        title="The timeout fired long after it expired",
        scenario="timeout-settings",
        reason=(f"Line {e.line_no}: the work ran {ran_ms // 1000} s against a {timeout_ms // 1000} s "
                "timeout: the watchdog could not act for a long time (blocked, or error handling off)."),
        fix=("Leave TORCH_NCCL_ASYNC_ERROR_HANDLING at its default (3) and the heartbeat monitor on; "
             "`nccl-workbook doctor` lists the settings in effect."),
        score=_LATE_WATCHDOG,
        culprit_ranks=_ranks(slow),
        evidence_lines=_lines(slow),
    )


def _torch_named_late(ev: Evidence, found: Found) -> Iterator[Finding]:
    """torch itself names the late ranks (monitored barrier, desync report)."""
    late = ev.summary.named_late
    if not late or any(f.scenario == "rank0-work-before-barrier" for f in found):
        return
    named = _of(ev.events, EventKind.MONITORED_BARRIER, EventKind.DESYNC_REPORT)
    first = named[0]
    source = ("rank 0's monitored_barrier" if first.kind is EventKind.MONITORED_BARRIER
              else "the NCCL desync report (TORCH_NCCL_DESYNC_DEBUG)")
    yield Finding(
        title="torch named the late ranks",
        scenario=None,
        reason=(f"According to {source} (line {first.line_no}), {_who(late)} did not arrive: "
                f"{first.detail}. Those ranks were elsewhere when the others entered the collective."),
        fix="Look at what those ranks were doing at that point (their tracebacks, or `py-spy dump`).",
        score=_TORCH_NAMED_LATE,
        culprit_ranks=late,
        evidence_lines=_lines(named),
    )


def _root_cause_victim(ev: Evidence, found: Found) -> Iterator[Finding]:
    """torchrun's "Root Cause (first observed failure)" names the first process to die, often a
    rank that only waited (its own watchdog aborted it): say so when the log points elsewhere."""
    root = next((e for e in ev.exits if "root cause" in e.detail), None)
    if root is None or not found:
        return
    best = max(found, key=lambda f: f.score)
    culprits = best.culprit_ranks
    waited = root.rank in ev.waiting_ranks or root.rank in _ranks(ev.store)
    if not culprits or root.rank in culprits or not (waited or "SIGABRT" in root.detail):
        return
    how = ("saw its peer's connection close" if root.rank in _ranks(ev.closed)
           else "timed out waiting" if waited else "was aborted by its own watchdog (SIGABRT)")
    yield Finding(
        title="torchrun's root cause is a victim",
        scenario=None,
        reason=(f"torchrun's 'Root Cause (first observed failure)' names rank {root.rank} (line {root.line_no}), "
                f"but rank {root.rank} {how}: it is the first process to die, not the one that caused the "
                f"failure; the log points at {_who(culprits)} ({best.title.lower()})."),
        fix="Read the culprit rank's output first; the launcher only reports which process exited first.",
        score=_ROOT_CAUSE_VICTIM,
        culprit_ranks=culprits,
        evidence_lines=(root.line_no,),
    )


def _cannot_decide(ev: Evidence, found: Found) -> Iterator[Finding]:
    """Ranks waited, and no rule above reached a medium score: say so, and what to collect."""
    s = ev.summary
    if not ev.waits or max((f.score for f in found), default=0.0) >= _DECIDES:
        return
    reason = (f"{_who(ev.waiting_ranks).capitalize()} reported waiting in {ev.op or 'a collective'}"
              + (f" (SeqNum {s.failed_seq})" if s.failed_seq is not None else ""))
    if not s.ranks_missing and not s.ranks_behind:
        reason += (", no rank is missing and none is behind by its watchdog status: the log cannot decide "
                   "which rank was late (or whether the network stalled).")
    else:
        reason += (_late_clause(s, ev.late, "; {who} did not report") + ", but nothing in the log says why: "
                   "the log cannot decide between a hang, a slow rank and a crash on that rank.")
    yield Finding(
        title="The log cannot decide",
        scenario=None,
        reason=reason,
        fix=("Collect the missing evidence on the next run: the output of every rank (torchrun --tee 3 or "
             "per-rank log files), flight-recorder dumps (TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_TEMP_FILE; "
             "analyse with torchfrtrace), `py-spy dump` of each rank while it hangs, and "
             "`dist.monitored_barrier(wait_all_ranks=True)` on a gloo group before the failing step."),
        score=_CANNOT_DECIDE,
        culprit_ranks=ev.late,
        evidence_lines=_lines(ev.waits),
    )


def _what_the_timeout_does(ev: Evidence, found: Found) -> Iterator[Finding]:
    if not ev.waits or any(f.scenario == "timeout-settings" for f in found):
        return
    pg_timeout = ev.summary.timeout_ms
    yield Finding(
        title="What the timeout setting can and cannot do",
        scenario="timeout-settings",
        reason=("A process-group timeout fired" + (f" ({pg_timeout // 1000} s)" if pg_timeout else "")
                + ". If the late rank was only slow, the timeout was shorter than that phase; if it was stuck, "
                "no timeout helps. NCCL has no NCCL_TIMEOUT: only `init_process_group(timeout=)` sets it."),
        fix="Set the timeout with `init_process_group(timeout=timedelta(...))`; fix the late rank first.",
        score=_TIMEOUT_SETTING,
        evidence_lines=_lines(ev.waits, 1),
    )


def _nothing_to_go_on(ev: Evidence, found: Found) -> Iterator[Finding]:
    if found:
        return
    if not ev.events:
        reason = ("No known failure message was found in this log (it may be empty, binary, or from a rank that "
                  "did not fail).")
    else:
        reason = ("Messages were recognised but none of them is a failure (only status or launcher lines): the "
                  "log cannot decide what went wrong.")
    yield Finding(
        title="Nothing to go on",
        scenario=None,
        reason=reason,
        fix="Triage the output of every rank (torchrun --tee 3, or one file per rank concatenated).",
        score=_NOTHING,
    )


@dataclass(frozen=True)
class Rule:
    """One cause the triage knows: the scenarios its findings can name (``None``: no workbook
    scenario fits) and the function that looks for it."""

    name: str
    scenarios: tuple[str | None, ...]
    find: Callable[[Evidence, Found], Iterable[Finding]]


#: every rule, in the order they run (a rule sees the findings of the rules above it; findings of
#: equal score keep this order)
RULES: tuple[Rule, ...] = (
    Rule("too many open files", ("fd-exhaustion",), _fd_exhaustion),
    Rule("data loader stalled or died", ("dataloader-stall",), _dataloader_stall),
    Rule("collective mismatch reported", ("collective-mismatch",), _collective_mismatch),
    Rule("timeouts disagree on the op", ("collective-mismatch",), _timeouts_disagree),
    Rule("a rank in another collective", ("uneven-eval-allgather", "collective-mismatch"), _rank_elsewhere),
    Rule("a rank left early", ("uneven-eval-allgather",), _rank_left_early),
    Rule("DDP unused parameters", ("unused-parameters",), _unused_parameters),
    Rule("exception or CUDA error on a rank", ("exception-on-one-rank",), _exception_on_one_rank),
    Rule("a peer went away", ("exception-on-one-rank",), _peer_went_away),
    Rule("store / rendezvous", ("init-rendezvous-timeout", None), _rendezvous),
    Rule("the store's process went away", (None,), _store_gone),
    Rule("connections could not be set up", (None,), _connect_failed),
    Rule("two ranks on one GPU", (None,), _duplicate_gpu),
    Rule("NCCL error", (None,), _nccl_error),
    Rule("ranks waited for rank 0", ("rank0-work-before-barrier", "slow-metrics-on-rank0"), _rank0_late),
    Rule("all-gather with a late rank", ("uneven-eval-allgather",), _uneven_allgather),
    Rule("slow rank in gradient all-reduces", ("slow-rank-dynamic-shapes",), _slow_rank),
    Rule("watchdog stuck", ("timeout-settings",), _watchdog_stuck),
    Rule("DataLoader timeout not below the group's", ("timeout-settings",), _dataloader_timeout_not_below),
    Rule("timeout fired late", ("timeout-settings",), _late_watchdog),
    Rule("torch named the late ranks", (None,), _torch_named_late),
    Rule("torchrun's root cause is a victim", (None,), _root_cause_victim),
    Rule("the log cannot decide", (None,), _cannot_decide),
    Rule("what the timeout does", ("timeout-settings",), _what_the_timeout_does),
    Rule("nothing to go on", (None,), _nothing_to_go_on),
)

#: the scenario ids the rules can name (each must be registered in ``nccl_workbook.scenarios``)
NAMED_SCENARIOS: frozenset[str] = frozenset(s for rule in RULES for s in rule.scenarios if s is not None)


def rank_causes(events: list[Event] | tuple[Event, ...], summary: JobSummary) -> list[Finding]:
    """Events + summary -> findings, most likely first. Never empty: when nothing is recognised
    or nothing decides, the list holds one finding that says so."""
    evidence = Evidence.of(events, summary)
    out: list[Finding] = []
    for rule in RULES:
        out.extend(rule.find(evidence, tuple(out)))
    if summary.partial:
        out = [_lowered(f, summary) for f in out]
    out.sort(key=lambda f: -f.score)
    return out


def _lowered(finding: Finding, summary: JobSummary) -> Finding:
    """``finding`` one confidence level down (a partial log); its reason says why when the level changed."""
    lowered = dataclasses.replace(finding, score=max(finding.score - _PARTIAL_PENALTY, _SCORE_FLOOR))
    if lowered.confidence is finding.confidence:
        return lowered
    covered = _who(summary.ranks_covered)
    extent = (f"{covered} of {summary.world_size}" if summary.world_size_stated
              else f"{covered} and does not state the world size")
    return dataclasses.replace(lowered, reason=f"{finding.reason} Confidence lowered: the log covers only {extent}.")


def _missing_clients(event: Event) -> str:
    try:
        joined, expected = (int(x) for x in event.detail.split()[0].split("/"))
    except (ValueError, IndexError):
        return "some ranks"
    n = expected - joined
    return f"{n} of {expected} ranks" if n != 1 else f"1 of {expected} ranks"
