"""The triage result as one value: events, job summary, ranked findings; text, JSON and HTML.

Usage::

    from nccl_workbook.triage import triage_log
    report = triage_log(open("job.log", "rb").read())
    print(report.render())          # the readable report (what `nccl-workbook triage FILE` prints)
    report.to_json()                # {"events": [...], "summary": {...}, "findings": [...]}
    report.top                      # the most likely Finding
    report                          # in Jupyter: the same report as HTML
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.triage.events import Event, events_frame
from nccl_workbook.triage.findings import Finding, rank_causes
from nccl_workbook.triage.job import JobSummary, LogRankState, _fmt, summarize
from nccl_workbook.triage.parser import read_log

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["TriageReport", "triage_log", "render_text"]


@dataclass(frozen=True, repr=False)
class TriageReport:
    """Everything triage concluded from one log."""

    events: tuple[Event, ...]
    summary: JobSummary
    findings: tuple[Finding, ...]
    #: size of the input in bytes (text input counted as UTF-8)
    n_bytes: int
    #: True when the log had more events than the cap: all were counted (``summary.n_events``),
    #: the first ``summary.n_events_kept`` kept and read for details
    truncated: bool = False

    @property
    def top(self) -> Finding:
        """The most likely cause (there is always at least one finding)."""
        return self.findings[0]

    @property
    def culprit_ranks(self) -> tuple[int, ...]:
        """The ranks the top finding points at."""
        return self.top.culprit_ranks

    def events_frame(self) -> pd.DataFrame:
        return events_frame(list(self.events))

    def ranks_frame(self) -> pd.DataFrame:
        return self.summary.ranks_frame()

    def plot(self) -> Figure:
        """Which ranks reported what, along the log (see :func:`plot_rank_events`)."""
        from nccl_workbook.triage.plots import plot_rank_events

        return plot_rank_events(self.events_frame(), missing_ranks=self.summary.ranks_missing,
                                culprit_ranks=self.culprit_ranks)

    def to_json(self) -> dict[str, Any]:
        """The ``triage --json`` object: ``events`` in log order, ``summary``, ranked ``findings``."""
        return {
            "events": [e.to_json() for e in self.events],
            "summary": self.summary.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "n_bytes": self.n_bytes,
            "truncated": self.truncated,
        }

    def render(self) -> str:
        return render_text(self)

    def __repr__(self) -> str:
        culprits = _fmt(self.culprit_ranks) if self.culprit_ranks else "none named"
        return (f"<TriageReport: {len(self.events)} events, top: {self.top.scenario or self.top.title} "
                f"({self.top.confidence.value}), culprit ranks: {culprits}>")

    def __str__(self) -> str:
        return self.render()

    def _repr_html_(self) -> str:
        return "<pre style='white-space:pre-wrap'>" + html.escape(self.render()) + "</pre>"


def triage_log(data: bytes | bytearray | memoryview | str) -> TriageReport:
    """Any log bytes/text -> :class:`TriageReport`. Never raises on bad data."""
    parsed = read_log(data)
    summary = summarize(parsed.events, parsed.tally)
    findings = rank_causes(parsed.events, summary)
    return TriageReport(
        events=parsed.events,
        summary=summary,
        findings=tuple(findings),
        n_bytes=len(data.encode("utf-8", errors="replace")) if isinstance(data, str) else len(data),
        truncated=parsed.tally.capped,
    )


def _what_happened(report: TriageReport) -> str:
    s = report.summary
    if not report.events:
        return "No known failure message found."
    if not s.ranks_reported and s.unranked_failures == 0:
        return "Only status or launcher lines were recognised; no failure message."
    parts = []
    if s.failed_op or s.failed_seq is not None:
        what = s.failed_op or "a collective"
        extra = []
        if s.failed_seq is not None:
            extra.append(f"SeqNum {s.failed_seq}")
        if s.failed_numel is not None:
            extra.append(f"NumelIn={s.failed_numel}")
        if s.timeout_ms:
            extra.append(f"timeout {s.timeout_ms / 1000:g} s")
        waiting = [r.rank for r in s.per_rank if r.status in (LogRankState.TIMEOUT, LogRankState.PEER_CLOSED)]
        who = f" on rank(s) {_fmt(waiting)}" if waiting else ""
        parts.append(f"{what} ({', '.join(extra)}) failed{who}." if extra else f"{what} failed{who}.")
    if s.earliest is not None:
        e = s.earliest
        rank = f"rank {e.rank}" if e.rank is not None else "an unnamed rank"
        parts.append(f"First failure in the log: line {e.line_no}, {rank}, {e.kind.value}"
                     + (f" ({e.detail})" if e.detail else "") + ".")
    return " ".join(parts)


def _which_rank(report: TriageReport) -> str:
    s = report.summary
    bits = []
    if s.ranks_reported:
        bits.append(f"reported: {_fmt(s.ranks_reported)}")
    if s.ranks_missing:
        bits.append(f"silent: {_fmt(s.ranks_missing)} (world size {s.world_size}, {s.world_size_basis})")
    if s.ranks_behind:
        bits.append(f"behind: {_fmt(s.ranks_behind)} ({s.behind_reason})")
    if s.named_late:
        bits.append(f"named late by monitored_barrier: {_fmt(s.named_late)}")
    if s.first_detectors:
        bits.append(f"first to see the timeout: {_fmt(s.first_detectors)}")
    if s.unranked_failures:
        bits.append(f"{s.unranked_failures} failure line(s) name no rank")
    culprits = report.culprit_ranks
    lead = (f"Most likely: rank(s) {_fmt(culprits)}." if culprits else "The log does not name the culprit rank.")
    return lead + (" " + "; ".join(bits) + "." if bits else "")


def render_text(report: TriageReport) -> str:
    """The readable report: what happened, which rank, per-rank table, ranked causes + fixes."""
    s = report.summary
    lines = [
        f"nccl-workbook triage: {s.n_events} events"
        f" from {len(s.ranks_seen)} rank(s) in {report.n_bytes:,} bytes"
        + (f" (event cap reached: all counted, details from the first {s.n_events_kept})" if report.truncated
           else ""),
        "",
        "What happened: " + _what_happened(report),
        "Which rank:    " + _which_rank(report),
    ]
    if s.per_rank:
        lines += ["", "Per rank:", f"  {'rank':>5}  {'status':<11} {'first':<22} {'line':>6}  {'op':<16} "
                  f"{'seq':>10} {'enqueued':>10} {'completed':>10}"]
        shown = s.per_rank if len(s.per_rank) <= 64 else s.per_rank[:64]
        for r in shown:
            lines.append(
                f"  {r.rank:>5}  {r.status.value:<11} {(r.first_kind.value if r.first_kind else '-'):<22} "
                f"{(r.first_line if r.first_line is not None else '-')!s:>6}  {(r.op_type or '-'):<16} "
                f"{_n(r.seq_num):>10} {_n(r.last_enqueued):>10} {_n(r.last_completed):>10}"
            )
        if len(s.per_rank) > len(shown):
            lines.append(f"  ... {len(s.per_rank) - len(shown)} more ranks (see --json)")
    lines += ["", "Likely causes (most likely first):"]
    for i, f in enumerate(report.findings, 1):
        where = f" -> {f.notebook_path}" if f.notebook_path else ""
        lines.append(f"  {i}. [{f.confidence.value}] {f.title} ({f.scenario or 'no scenario'}){where}")
        if f.culprit_ranks:
            lines.append(f"     ranks: {_fmt(f.culprit_ranks)}")
        lines.append(f"     why: {f.reason}")
        lines.append(f"     fix: {f.fix}")
    return "\n".join(lines) + "\n"


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
