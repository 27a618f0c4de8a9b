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
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.triage.events import Event, events_frame
from nccl_workbook.triage.findings import Finding, rank_causes
from nccl_workbook.triage.job import JobSummary, LogRankState, RankRow, _fmt, _who, summarize
from nccl_workbook.triage.parser import read_log

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["TriageReport", "triage_log", "render_text"]

#: the report's text is wrapped at word boundaries to this width (a word longer than a line, such as a
#: path, is left whole)
WIDTH = 100
#: a notebook path in the text (``notebooks/06_uneven_eval_allgather.ipynb``): a link in the HTML form
_NOTEBOOK_PATH = re.compile(r"notebooks/(\d\d_[\w.-]+?\.ipynb)")
#: the labels of the report's first lines, padded so their text lines up
_LABEL_WIDTH = 15


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
        """The text report, with each notebook it names a link (relative to ``notebooks/``, where the
        workbook's notebooks, the triage one included, live)."""
        linked = _NOTEBOOK_PATH.sub(r'<a href="\1">\1</a>', html.escape(self.render()))
        return "<pre style='white-space:pre-wrap'>" + linked + "</pre>"


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
    quiet = tuple(r for r in s.ranks_missing if r not in s.ranks_absent + s.ranks_behind + s.named_late)
    if quiet:
        bits.append(f"in the log without a failure: {_fmt(quiet)}")
    if s.ranks_behind:
        bits.append(f"behind: {_fmt(s.ranks_behind)} ({s.behind_reason})")
    if s.named_late:
        bits.append(f"named late by monitored_barrier: {_fmt(s.named_late)}")
    if s.first_detectors:
        bits.append(f"first to see the timeout: {_fmt(s.first_detectors)}")
    if s.unranked_failures:
        bits.append(f"{s.unranked_failures} failure line(s) name no rank")
    return _most_likely(report) + (" " + "; ".join(bits) + "." if bits else "")


def _most_likely(report: TriageReport) -> str:
    """The lead of "Which rank": the top finding's ranks and confidence; ranks the log has no line
    from are said to be so, not named as if the log showed them late."""
    culprits, confidence = report.culprit_ranks, report.top.confidence.value
    if not culprits:
        return "The log does not name the culprit rank."
    absent = report.summary.ranks_absent
    if not set(culprits) <= set(absent):
        return f"Most likely: {_who(culprits)} [{confidence}]."
    if len(culprits) == 1:
        return f"Most likely: rank {culprits[0]}, which is not in the log [{confidence}]."
    return f"Most likely: one of ranks {_fmt(culprits)}, which are not in the log [{confidence}]."


def render_text(report: TriageReport, width: int = WIDTH) -> str:
    """The readable report: what happened, which ranks the log covers, which rank, per-rank table,
    ranked causes + fixes; prose wrapped at word boundaries to ``width``."""
    s = report.summary
    lines = [
        *_wrap(f"nccl-workbook triage: {s.n_events} events"
               f" from {len(s.ranks_seen)} rank(s) in {report.n_bytes:,} bytes"
               + (f" (event cap reached: all counted, details from the first {s.n_events_kept})"
                  if report.truncated else ""), width),
        "",
        *_labelled("What happened:", _what_happened(report), width),
        *_labelled("In the log:", s.coverage if report.events else "", width),
        *_labelled("Which rank:", _which_rank(report), width),
    ]
    if s.per_rank:
        shown = s.per_rank if len(s.per_rank) <= _MAX_TABLE_RANKS else s.per_rank[:_MAX_TABLE_RANKS]
        lines += ["", "Per rank:", *_rank_table(shown, width)]
        if len(s.per_rank) > len(shown):
            lines.append(f"  ... {len(s.per_rank) - len(shown)} more ranks (see --json)")
        lines += _sites(shown, width)
    lines += ["", "Likely causes (most likely first):"]
    for i, f in enumerate(report.findings, 1):
        lines += _wrap(f"  {i}. [{f.confidence.value}] {f.title} ({f.scenario or 'no scenario'})", width,
                       indent=_FINDING_INDENT)
        if f.notebook_path:
            lines += _wrap(f"{_FINDING_INDENT}notebook: {f.notebook_path}", width, indent=_FINDING_INDENT)
        if f.culprit_ranks:
            lines += _wrap(f"{_FINDING_INDENT}ranks: {_fmt(f.culprit_ranks)}", width, indent=_FINDING_INDENT)
        lines += _wrap(f"{_FINDING_INDENT}why: {f.reason}", width, indent=_FINDING_INDENT)
        lines += _wrap(f"{_FINDING_INDENT}fix: {f.fix}", width, indent=_FINDING_INDENT)
    return "\n".join(lines) + "\n"


#: where a finding's own lines (ranks, why, fix) start
_FINDING_INDENT = " " * 5


def _labelled(label: str, text: str, width: int) -> list[str]:
    """``'What happened: ...'``, continued under the text (nothing when there is no text)."""
    if not text:
        return []
    return _wrap(label.ljust(_LABEL_WIDTH) + text, width, indent=" " * _LABEL_WIDTH)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` wrapped at spaces to ``width``, continuation lines starting with ``indent``; a word
    longer than a line (a path, a hyphenated name) stays whole on a line of its own."""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False,
                         drop_whitespace=True) or [""]


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


#: the per-rank table shows this many ranks (the rest are in --json)
_MAX_TABLE_RANKS = 64
#: the table's columns: header, right-aligned
_COLUMNS = (("rank", True), ("status", False), ("first", False), ("line", True), ("op", False), ("seq", True),
            ("enqueued", True), ("completed", True))
_OP_COLUMN = 4
_GAP = "  "


def _rank_table(rows: tuple[RankRow, ...], width: int) -> list[str]:
    """The per-rank table, each column as wide as its widest cell; when that is wider than ``width``,
    the op column is narrowed and its longest names end in '…'."""
    cells = [(str(r.rank), r.status.value, r.first_kind.value if r.first_kind else "-", _n(r.first_line),
              r.op_type or "-", _n(r.seq_num), _n(r.last_enqueued), _n(r.last_completed)) for r in rows]
    widths = [max(len(header), *(len(c[i]) for c in cells)) for i, (header, _) in enumerate(_COLUMNS)]
    excess = len(_GAP) * len(widths) + sum(widths) - width
    if excess > 0:
        widths[_OP_COLUMN] = max(len("op"), widths[_OP_COLUMN] - excess)
    return [_GAP + _GAP.join(_cell(text, w, right) for text, w, (_, right) in zip(row, widths, _COLUMNS))
            for row in [tuple(h for h, _ in _COLUMNS), *cells]]


_SITE_PHRASE = {"collective": "in a collective", "data": "loading data", "code": "in user code"}


def _sites(rows: tuple[RankRow, ...], width: int) -> list[str]:
    """Where each rank's last traceback puts it (``RankRow.site``), ranks at the same place together."""
    by_site: dict[str, list[int]] = {}
    for r in rows:
        if r.site:
            by_site.setdefault(r.site, []).append(r.rank)
    if not by_site:
        return []
    parts = []
    for site, ranks in by_site.items():
        kind, _, where = site.partition(": ")
        parts.append(f"{_who(tuple(ranks))} {_SITE_PHRASE.get(kind, kind)} ({where})")
    return _wrap("  Their tracebacks put " + "; ".join(parts) + ".", width, indent="    ")


def _cell(text: str, width: int, right: bool) -> str:
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text.rjust(width) if right else text.ljust(width)
