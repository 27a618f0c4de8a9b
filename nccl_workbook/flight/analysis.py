"""Reading flight-recorder dumps: the workbook's trace frame and diagnosis, torch's own analyzer
as a value, and one report with both. See :mod:`nccl_workbook.flight` for the whole picture.

pandas and the diagnosis are imported when first used, so that ``nccl-workbook`` starts fast.

Usage::

    trace_from_dumps(dumps)          # the trace frame (nccl_workbook.trace.COLUMNS)
    diagnose_dumps(dumps)            # Diagnosis: late/missing rank, op, from the dumps alone
    run_torch_analyzer(fix_for_torch(dumps))   # AnalyzerVerdict of torchfrtrace's build_db
    analyze_dumps(dumps).render()    # both, as text (the ``nccl-workbook fr`` report)
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import html
import io
import logging
import os
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nccl_workbook.flight.dumps import (
    FR_FILE_PREFIX,
    TRACKS_COMPLETION,
    EntryState,
    FlightDumps,
    FlightEntry,
    fix_for_torch,
    group_members,
    nccl_op_name,
    select_run,
    snapshot_at,
)
from nccl_workbook.status import RankStatus

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.diagnose import Diagnosis

__all__ = [
    "AnalyzerStatus",
    "AnalyzerVerdict",
    "FlightReport",
    "trace_from_dumps",
    "statuses_from_dumps",
    "first_timeout_ns",
    "as_of_first_timeout",
    "diagnose_dumps",
    "run_torch_analyzer",
    "analyze_dumps",
]


# -- entries -> the workbook's trace frame ----------------------------------------------------


@dataclass(frozen=True)
class _Op:
    """One logical collective on one rank (a coalesced group collapsed to one)."""

    rank: int
    pg: str
    seq: int
    name: str
    numel: int | None
    nbytes: int | None
    dtype: str | None
    created_ns: int
    started_ns: int | None
    completed_ns: int | None
    state: EntryState
    backend: str
    timeout_ms: int | None


def _ops(dumps: FlightDumps) -> list[_Op]:
    from nccl_workbook.trace import join_dtypes

    ops: list[_Op] = []
    for r, d in sorted(dumps.by_rank.items()):
        groups: list[list[FlightEntry]] = []
        for e in d.entries:
            key = (e.pg_id, e.is_p2p, e.seq)
            if groups and (groups[-1][0].pg_id, groups[-1][0].is_p2p, groups[-1][0].seq) == key:
                groups[-1].append(e)
            else:
                groups.append([e])
        for g in groups:
            first, last = g[0], g[-1]
            marker = len(g) > 1 and last.op.endswith("COALESCED")  # the entry that closes a coalesced group
            members = g[:-1] if marker else g
            kinds = {e.op for e in members}
            name = last.op if marker and last.op != "COALESCED" else kinds.pop() if len(kinds) == 1 else "COALESCED"
            numels = [e.numel for e in members]
            nbytes = [e.nbytes for e in members]
            ops.append(_Op(
                rank=r,
                pg=f"{first.pg_name}:p2p" if first.is_p2p else first.pg_name,
                seq=first.seq,
                name=name,
                numel=None if any(n is None for n in numels) else sum(numels),  # type: ignore[arg-type]
                nbytes=None if any(n is None for n in nbytes) else sum(nbytes),  # type: ignore[arg-type]
                dtype=join_dtypes(e.dtype for e in members),
                created_ns=first.time_created_ns,
                started_ns=last.time_discovered_started_ns,
                completed_ns=last.time_discovered_completed_ns,
                state=last.state,
                backend=first.backend,
                timeout_ms=last.timeout_ms,
            ))
    return ops


@dataclass(frozen=True)
class _Fate:
    status: str  # "ok" | "running"
    t_start_ns: int | None
    t_end_ns: int | None


def _fates(dumps: FlightDumps, ops: list[_Op]) -> list[_Fate]:
    """Status and times of each op. gloo's are inferred: an op the rank moved past (a later
    sequence number of the same group) finished; the rank's last op of a group finished when
    every member reached it, with the same op, size and dtype, within its timeout."""
    members = group_members(dumps)
    members.update({f"{k}:p2p": v for k, v in list(members.items())})
    at: dict[tuple[str, int], dict[int, int]] = defaultdict(dict)
    sigs: dict[tuple[str, int], set[tuple[str, int | None, str | None]]] = defaultdict(set)
    last_seq: dict[tuple[int, str], int] = {}
    for o in ops:
        at[(o.pg, o.seq)][o.rank] = o.created_ns
        sigs[(o.pg, o.seq)].add((o.name, o.numel, o.dtype))
        last_seq[(o.rank, o.pg)] = max(last_seq.get((o.rank, o.pg), o.seq), o.seq)
    fates = []
    for o in ops:
        if o.state is EntryState.COMPLETED:
            fates.append(_Fate("ok", o.started_ns, max(o.completed_ns or o.created_ns, o.created_ns)))
            continue
        if o.backend in TRACKS_COMPLETION:
            fates.append(_Fate("running", o.started_ns, None))
            continue
        arrivals = at[(o.pg, o.seq)]
        last_arrival = max(arrivals.values())
        if o.seq < last_seq[(o.rank, o.pg)]:  # the rank moved on to the group's next collective
            fates.append(_Fate("ok", o.created_ns, max(last_arrival, o.created_ns)))
            continue
        everyone = set(members.get(o.pg, (o.rank,))) <= set(arrivals)
        same = len(sigs[(o.pg, o.seq)]) == 1
        in_time = o.timeout_ms is None or last_arrival - min(arrivals.values()) <= o.timeout_ms * 1_000_000
        if everyone and same and in_time:
            fates.append(_Fate("ok", o.created_ns, last_arrival))
        else:
            fates.append(_Fate("running", o.created_ns, None))
    return fates


def trace_from_dumps(dumps: FlightDumps) -> pd.DataFrame:
    """The dumps as a trace frame (:data:`nccl_workbook.trace.COLUMNS`): one ``collective`` row
    per recorded op (a coalesced group is one row), ``name`` in NCCL's spelling, ``pg`` the process
    group name (``<name>:p2p`` for send/recv), ``seq`` its sequence number, ``numel``/``nbytes``/``dtype``
    from the input sizes and dtypes, ``t_enqueue_ns`` = ``time_created_ns``.

    ``status``/``t_end_ns``: NCCL entries are ``ok`` with the time the watchdog saw them complete,
    or ``running`` (in flight when the dump was taken) with ``t_end_ns`` NA. gloo records neither:
    an entry is ``ok`` when the rank moved on, or every member reached it with the same op, size and dtype
    within the timeout, with ``t_end_ns`` = the last member's arrival (the earliest it can have
    completed), else ``running``; ``t_start_ns`` is the call time, as the tracer records it.
    """
    from nccl_workbook.trace import TraceRow, trace_frame

    selected = select_run(dumps)
    ops = _ops(selected)
    rows = [
        TraceRow(rank=o.rank, kind="collective", name=o.name, pg=o.pg, seq=o.seq, numel=o.numel, nbytes=o.nbytes,
                 t_enqueue_ns=o.created_ns, t_start_ns=f.t_start_ns, t_end_ns=f.t_end_ns, status=f.status, dtype=o.dtype)
        for o, f in zip(ops, _fates(selected, ops))
    ]
    return trace_frame(rows)


def statuses_from_dumps(dumps: FlightDumps) -> dict[int, RankStatus]:
    """Per rank with a dump: ``timeout`` when it was left inside a collective that did not finish
    (see :func:`trace_from_dumps`), else ``ok``. Ranks without a dump are absent."""
    df = trace_from_dumps(dumps)
    running = set(int(r) for r in df.loc[df["status"] == "running", "rank"])
    return {r: RankStatus.TIMEOUT if r in running else RankStatus.OK for r in dumps.ranks}


def _pending(dumps: FlightDumps) -> list[tuple[_Op, _Fate]]:
    selected = select_run(dumps)
    ops = _ops(selected)
    return [(o, f) for o, f in zip(ops, _fates(selected, ops)) if f.status == "running"]


def first_timeout_ns(dumps: FlightDumps) -> int | None:
    """When the first unfinished collective's timeout ran out (its creation + ``timeout_ms``):
    the moment NCCL's watchdog fires and every rank dumps. None if nothing was left unfinished."""
    times = [o.created_ns + o.timeout_ms * 1_000_000 for o, _ in _pending(dumps) if o.timeout_ms]
    return min(times) if times else None


def as_of_first_timeout(dumps: FlightDumps) -> FlightDumps:
    """:func:`snapshot_at` the moment of :func:`first_timeout_ns`: what NCCL's coordinated
    dump-on-timeout would hold (the rank that times out signals the others through the store;
    they dump within ``TORCH_NCCL_COORD_CHECK_MILSEC``, 1 s by default, so a real dump may hold
    up to that much more). Useful for gloo dumps, which are taken after each rank's own failure."""
    t = first_timeout_ns(dumps)
    if t is None:
        return dumps
    cut = snapshot_at(select_run(dumps), t)
    return dataclasses.replace(cut, source=f"{dumps.source or 'dumps'}, as of the first timeout",
                               notes=(*dumps.notes, "cut at the moment the first collective timed out "
                                      "(what NCCL's dump-on-timeout holds)"))


def diagnose_dumps(dumps: FlightDumps) -> Diagnosis:
    """:func:`nccl_workbook.diagnose.diagnose` on the dumps alone: the frame from
    :func:`trace_from_dumps`, statuses from :func:`statuses_from_dumps`, the group timeout from
    the unfinished entries' ``timeout_ms``."""
    from nccl_workbook.diagnose import Diagnosis, Verdict, diagnose

    df = trace_from_dumps(dumps)
    statuses = statuses_from_dumps(dumps)
    pending = _pending(dumps)
    timeouts = [o.timeout_ms for o, _ in sorted(pending, key=lambda p: p[0].created_ns) if o.timeout_ms]
    if not timeouts:
        timeouts = [e.timeout_ms for d in dumps.by_rank.values() for e in d.entries if e.timeout_ms]
    timeout_s = timeouts[0] / 1000 if timeouts else 600.0
    if len(df) == 0:
        return Diagnosis(Verdict.UNKNOWN, (), None, message="the dumps hold no collectives")
    d = diagnose(df, statuses, world_size=dumps.world_size, pg_timeout_s=timeout_s)
    how = ("gloo dumps: completion inferred from the entries (gloo records none)" if "gloo" in dumps.backend
           else f"{dumps.backend} dumps: states as recorded")
    return dataclasses.replace(d, evidence=(*d.evidence, f"from flight-recorder dumps of ranks {list(dumps.ranks)}; {how}"))


# -- torch's analyzer ---------------------------------------------------------------------------


class AnalyzerStatus(str, enum.Enum):
    """What torch's analyzer concluded."""

    #: every collective matched across ranks (it compares ops, sizes, dtypes and states, not times)
    NO_ISSUE = "no_issue"
    #: a collective that some member ranks never called ("Not all ranks joining collective")
    MISSING_RANKS = "missing_ranks"
    #: ranks disagree on op, sizes, dtypes or state at the same sequence number
    MISMATCH = "mismatch"
    #: the analyzer raised (e.g. ``KeyError`` on a gloo dump's pg_config)
    CRASHED = "crashed"
    #: it did not finish within the time limit
    TIMED_OUT = "timed_out"
    #: it could not decide, because the dumps of some ranks are missing (with --allow-incomplete-ranks)
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class AnalyzerVerdict:
    """torch's analyzer (``build_db`` of ``torchfrtrace``) on a set of dumps, as a value.

    ``collective`` is the profiling name (``gloo:barrier``) of the first collective it flagged,
    ``op`` that in NCCL's spelling; ``culprit_ranks`` are the missing ranks, or the ranks torch
    names as "Culprit rank" of a mismatch (it assumes the rank it started from was right).
    ``text`` is everything it logged.
    """

    status: AnalyzerStatus
    collective: str | None = None
    op: str | None = None
    pg: str | None = None
    collective_seq_id: int | None = None
    state: str | None = None
    missing_ranks: tuple[int, ...] = ()
    culprit_ranks: tuple[int, ...] = ()
    mismatch: str | None = None
    collectives_matched: int = 0
    error: str | None = None
    text: str = field(default="", repr=False)

    @property
    def summary(self) -> str:
        if self.status is AnalyzerStatus.CRASHED:
            return f"torch's analyzer crashed: {self.error}"
        if self.status is AnalyzerStatus.TIMED_OUT:
            return f"torch's analyzer did not finish: {self.error}"
        if self.status is AnalyzerStatus.NO_ISSUE:
            return f"torch's analyzer matched all {self.collectives_matched} collectives across ranks: no missing rank, no mismatch"
        if self.status is AnalyzerStatus.UNDECIDED:
            return (f"torch's analyzer matched {self.collectives_matched} collectives, then could not decide: no dumps "
                    f"from ranks {list(self.missing_ranks)}")
        where = f"{self.collective} (pg {self.pg}, seq {self.collective_seq_id}, state {self.state})"
        if self.status is AnalyzerStatus.MISSING_RANKS:
            return f"torch's analyzer: not all ranks joined {where}; missing ranks {list(self.missing_ranks)}"
        return f"torch's analyzer: mismatch at {where}: {self.mismatch}"

    def to_json(self) -> dict[str, object]:
        return {
            "status": self.status.value, "collective": self.collective, "op": self.op, "pg": self.pg,
            "collective_seq_id": self.collective_seq_id, "state": self.state, "missing_ranks": list(self.missing_ranks),
            "culprit_ranks": list(self.culprit_ranks), "mismatch": self.mismatch,
            "collectives_matched": self.collectives_matched, "error": self.error, "summary": self.summary,
        }


_FR_LOGGER = "Flight Recorder"
_analyzer_lock = threading.Lock()


def _details(dumps: FlightDumps) -> dict[str, dict[str, Any]]:
    """The per-file dicts torch's ``read_dump`` returns, built from dumps in memory."""
    out = {}
    for r, d in sorted(dumps.by_rank.items()):
        raw = d.to_dict()
        out[f"{FR_FILE_PREFIX}{r}"] = {"host_name": f"host_rank{r}", "rank": r, "entries": raw.get("entries") or [],
                                        "version": raw["version"], "pg_config": raw.get("pg_config") or {}}
    return out


def _verdict_from_db(db: Any, text: str) -> AnalyzerVerdict:  # noqa: ANN401 - torch's Database namedtuple
    flagged = next((c for c in db.collectives if c.missing_ranks or not c.pass_check), None)
    # a matched collective is one its per-rank calls point to (unmatched ones get collective_id None)
    matched = len({c.collective_id for c in db.ncclcalls if c.collective_id is not None})
    if flagged is None:
        undecided = re.search(r"missed FR dumps from ranks \((\{[\d, ]*\})\)", text)
        if undecided:
            ranks = tuple(sorted(int(x) for x in re.findall(r"\d+", undecided.group(1))))
            return AnalyzerVerdict(AnalyzerStatus.UNDECIDED, missing_ranks=ranks, collectives_matched=matched, text=text)
        return AnalyzerVerdict(AnalyzerStatus.NO_ISSUE, collectives_matched=matched, text=text)
    missing = tuple(sorted(int(r) for r in (flagged.missing_ranks or ())))
    mism = flagged.mismatch_collectives or {}
    descs = [f"rank {r}: {c.type_of_mismatch}" for r, c in sorted(mism.items())]
    status = AnalyzerStatus.MISSING_RANKS if missing and not mism else AnalyzerStatus.MISMATCH
    return AnalyzerVerdict(
        status,
        collective=str(flagged.collective_name),
        op=nccl_op_name(str(flagged.collective_name)),
        pg=str(flagged.group_id),
        collective_seq_id=int(flagged.collective_seq_id),
        state=str(flagged.collective_state),
        missing_ranks=missing,
        culprit_ranks=missing if status is AnalyzerStatus.MISSING_RANKS else tuple(sorted(int(r) for r in mism)),
        mismatch="; ".join(descs) or None,
        collectives_matched=matched,
        text=text,
    )


def run_torch_analyzer(dumps: FlightDumps | str | os.PathLike[str], *, allow_incomplete_ranks: bool = False,
                       timeout_s: float = 60.0) -> AnalyzerVerdict:
    """Run torch's own analyzer (``torchfrtrace``'s ``build_db``) and return its verdict.

    Given a folder, the files are read by torch's loader exactly as ``torchfrtrace FOLDER`` reads
    them; given :class:`FlightDumps`, their dicts are handed over in memory (nothing is changed:
    pass ``fix_for_torch(dumps)`` for gloo dumps). The analyzer runs in this process, in a
    thread with a time limit; what it logs is captured (not printed) and its exceptions become a
    ``CRASHED`` verdict. ``allow_incomplete_ranks`` is torch's flag of the same name (analyse
    although some ranks' dumps are missing).
    """
    result: dict[str, AnalyzerVerdict] = {}

    def work() -> None:
        with _analyzer_lock:  # one analysis at a time (it swaps a process-wide logger's handlers)
            analyse()

    def analyse() -> None:
        from torch.distributed.flight_recorder.components.fr_logger import FlightRecorderLogger

        FlightRecorderLogger()  # its one-time handler setup happens before we swap the handlers
        logger = logging.getLogger(_FR_LOGGER)
        buf = io.StringIO()
        handler = logging.StreamHandler(buf)
        handler.setFormatter(logging.Formatter("%(message)s"))
        saved = (list(logger.handlers), logger.level, logger.propagate)
        logger.handlers = [handler]
        logger.setLevel(logging.INFO)
        logger.propagate = False
        verbose_env = os.environ.get("FR_TRACE_VERBOSE_OUTPUT")
        gc_enabled = gc.isenabled()
        try:
            from torch.distributed.flight_recorder.components.builder import build_db
            from torch.distributed.flight_recorder.components.config_manager import JobConfig
            from torch.distributed.flight_recorder.components.loader import read_dir

            argv = [str(dumps) if not isinstance(dumps, FlightDumps) else "."]
            if allow_incomplete_ranks:
                argv.append("--allow-incomplete-ranks")
            args = JobConfig().parse_args(argv)
            if isinstance(dumps, FlightDumps):
                details = _details(dumps)
                version = str(next(iter(details.values()))["version"])
            else:
                details, version = read_dir(args)  # torch's loader, as torchfrtrace uses it
            db = build_db(details, args, version)
            result["v"] = _verdict_from_db(db, _clean_log(buf.getvalue()))
        except SystemExit as e:  # build_db exits on some paths; never let it end the caller
            result["v"] = AnalyzerVerdict(AnalyzerStatus.CRASHED, error=f"SystemExit({e.code})", text=_clean_log(buf.getvalue()))
        except Exception as e:  # noqa: BLE001 - the analyzer's failures are its verdict
            msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            result["v"] = AnalyzerVerdict(AnalyzerStatus.CRASHED, error=msg[:500], text=_clean_log(buf.getvalue()))
        finally:
            if gc_enabled and not gc.isenabled():
                gc.enable()  # torch's read_dir disables the garbage collector and never re-enables it
            if verbose_env is None:
                os.environ.pop("FR_TRACE_VERBOSE_OUTPUT", None)
            logger.handlers, logger.level, logger.propagate = saved[0], saved[1], saved[2]

    t = threading.Thread(target=work, name="torch-fr-analyzer", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():  # it goes on in the background; a later call waits for it to finish
        return AnalyzerVerdict(AnalyzerStatus.TIMED_OUT, error=f"no verdict after {timeout_s:g} s")
    return result["v"]


def _clean_log(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "tabulate is not installed" not in line)


# -- one report: torch's verdict and the workbook's --------------------------------------------


@dataclass(frozen=True)
class FlightReport:
    """Both readings of one set of dumps: torch's analyzer (on the files as they are, and after
    :func:`fix_for_torch`) and the workbook's diagnosis (:func:`diagnose_dumps`)."""

    source: str | None
    backend: str
    world_size: int
    ranks: tuple[int, ...]
    analyzer: AnalyzerVerdict
    analyzer_as_is: AnalyzerVerdict | None
    fixups: tuple[str, ...]
    diagnosis: Diagnosis
    as_of_first_timeout: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "backend": self.backend,
            "world_size": self.world_size,
            "ranks_with_dumps": list(self.ranks),
            "as_of_first_timeout": self.as_of_first_timeout,
            "torch_analyzer": self.analyzer.to_json(),
            "torch_analyzer_as_is": None if self.analyzer_as_is is None else self.analyzer_as_is.to_json(),
            "fixups": list(self.fixups),
            "diagnosis": self.diagnosis.summary,
        }

    def render(self) -> str:
        d = self.diagnosis
        lines = [
            f"flight-recorder dumps: {self.source or '-'} ({self.backend}, dumps from ranks "
            f"{list(self.ranks)} of {self.world_size}{', cut at the first timeout' if self.as_of_first_timeout else ''})",
        ]
        if self.analyzer_as_is is not None:
            lines.append(f"  as is: {self.analyzer_as_is.summary}")
        for f in self.fixups:
            lines.append(f"  fix-up: {f}")
        lines.append(f"  {self.analyzer.summary}")
        lines.append(f"workbook diagnosis: {d.verdict.value}; culprit ranks {list(d.culprit_ranks)}; op {d.failed_op or '-'}")
        if d.message:
            lines.append(f"  {d.message}")
        for e in d.evidence:
            lines.append(f"  - {e}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        d = self.diagnosis
        return (f"<FlightReport(source={self.source!r}, torch={self.analyzer.status.value}, "
                f"workbook={d.verdict.value} culprits={list(d.culprit_ranks)} op={d.failed_op})>")

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(self.render()) + "</pre>"


def analyze_dumps(dumps: FlightDumps, *, cut_at_first_timeout: bool = False) -> FlightReport:
    """Everything in one value: torch's analyzer on the dumps as they are (only when the fix-up
    changes something, to show why ``torchfrtrace`` failed on them), torch's analyzer after
    :func:`fix_for_torch`, and :func:`diagnose_dumps`. ``cut_at_first_timeout`` first applies
    :func:`as_of_first_timeout`."""
    base = as_of_first_timeout(dumps) if cut_at_first_timeout else dumps
    fixed = fix_for_torch(base)
    incomplete = bool(base.missing_dumps)
    as_is = run_torch_analyzer(base, allow_incomplete_ranks=incomplete) if fixed is not base else None
    verdict = run_torch_analyzer(fixed, allow_incomplete_ranks=incomplete)
    return FlightReport(dumps.source, dumps.backend, dumps.world_size, dumps.ranks, verdict, as_is,
                        fixed.notes[len(base.notes):], diagnose_dumps(base), base is not dumps)
