"""One renderer for run results, as text (CLI, notebooks' ``print``) and as HTML (``_repr_html_``,
the widgets): every face says the same thing in the same words.

- :func:`summary_line`: one line per run (``scenario [variant] outcome=… culprits=… op=…``).
- :func:`verdict_text`: the diagnosis next to the scenario's ground truth, a few lines: the block
  every scenario notebook shows after its broken run.
- :func:`live_line`: what the live detection named and when, with the word "resolved"/"unresolved"
  explained.
- :func:`results_text` / :func:`results_html`: everything about a list of runs (the CLI's summary,
  the panel's table and per-variant details).
- :func:`stacks_html`: every rank's stack when a stall was named.

Colours come from :data:`STATUS_COLOUR`, the one table of them. Error text is shortened by
:func:`nccl_workbook.status.short_error` only.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from nccl_workbook.status import short_error

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.results import RunResult

__all__ = [
    "STATUS_COLOUR",
    "summary_line",
    "verdict_text",
    "live_line",
    "results_text",
    "results_html",
    "stacks_html",
    "ranks_text",
]

#: outcome / rank status -> colour, for every HTML face
STATUS_COLOUR: dict[str, str] = {
    "ok": "#2e7d32", "timeout": "#c62828", "error": "#ef6c00", "crashed": "#6a1b9a", "peer_closed": "#ad1457",
}


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks)) if ranks else "–"


# -- text ------------------------------------------------------------------------------------
def summary_line(r: RunResult) -> str:
    """``rank0-work-before-barrier [broken] outcome=timeout culprits=0 op=BARRIER timeout=3s wall=5.1s``"""
    culprits = ",".join(map(str, r.culprit_ranks)) or "-"
    return (f"{r.scenario} [{r.variant}] outcome={r.outcome.value} culprits={culprits} op={r.failed_op or '-'} "
            f"timeout={r.pg_timeout_s:g}s wall={r.wall_s:.1f}s")


def verdict_text(r: RunResult) -> str:
    """The diagnosis from the trace alone next to the scenario's ground truth: the block every
    scenario notebook shows after its broken run."""
    if r.diagnosis is None:
        return f"outcome: {r.outcome.value} (no diagnosis)"
    d = r.diagnosis
    where = ""
    if d.failed_seq is not None:  # the seq number itself varies from run to run in some scenarios
        numel = _failed_numel(r)
        where = f" (process group {d.failed_pg}" + (f", NumelIn {numel})" if numel else ")")
    lines = [
        f"verdict:         {d.verdict.value}",
        f"failed op:       {r.failed_op}{where}",
        f"culprit ranks:   {list(r.culprit_ranks)}",
    ]
    if r.has_ground_truth:  # a scenario's
        lines += [f"ground truth:    {list(r.expected_culprits)}",
                  f"diagnosis agrees with ground truth: {r.diagnosis_agrees}"]
    elif d.message and not r.ok:  # a user's script has no ground truth: say why instead
        lines.append(f"why:             {d.message}")
    return "\n".join(lines)


def _failed_numel(r: RunResult) -> list[int]:
    """The element counts the ranks passed to the failed collective (one value when they agree)."""
    t, d = r.trace, r.diagnosis
    if t is None or d is None or len(t) == 0:
        return []
    rows = t[(t["kind"] == "collective") & (t["seq"] == d.failed_seq) & (t["pg"] == d.failed_pg)]
    return sorted({int(n) for n in rows["numel"].dropna()})


def live_line(r: RunResult) -> str:
    """The live detection in one line: who was named, how soon, and whether the wait ended by
    itself (resolved: a delay the timeout never saw) or lasted until the run failed (unresolved)."""
    h = r.hang
    if h is None:
        return "live: no rank waited long enough to suspect a stall"
    if h.resolved:
        took = f" after {h.wait_s:.1f} s" if h.wait_s is not None else ""
        return (f"live: ranks {list(h.waiting_ranks)} waited for rank(s) {list(h.culprit_ranks)} in {h.op} "
                f"(named {h.detected_after_s:.1f} s into the wait), then the wait ended by itself{took}: "
                f"resolved, a delay, not a hang")
    return (f"live: named rank(s) {list(h.culprit_ranks)} in {h.op} {h.detected_after_s:.1f} s after the others "
            f"started waiting (unresolved: still waiting when the run ended); the {r.pg_timeout_s:g} s timeout "
            f"needed {r.pg_timeout_s / max(h.detected_after_s, 1e-9):.1f}x longer")


def ranks_text(r: RunResult, *, error_chars: int = 110) -> str:
    """One line per rank, in rank order: status, steps, median step time, error."""
    out = []
    for p in sorted(r.per_rank, key=lambda p: p.rank):
        err = f"  {short_error(p.error, error_chars)}" if p.error else ""
        med = f"{p.step_time_median_s * 1e3:.1f} ms" if p.step_time_median_s is not None else "-"
        out.append(f"rank {p.rank}: {p.status.value:<11} steps={p.steps:<3} step median={med:<9}{err}")
    return "\n".join(out)


def results_text(results: Sequence[RunResult]) -> str:
    """What ``nccl-workbook run`` prints: per run its summary, diagnosis, live detection, ranks, notes."""
    out: list[str] = []
    for r in results:
        out.append(summary_line(r))
        if not r.ok and r.diagnosis is not None:
            agree = "agrees with" if r.diagnosis_agrees else "DIFFERS from"
            truth = f" ({agree} the scenario's ground truth {list(r.expected_culprits)})" if r.has_ground_truth else ""
            out.append(f"  diagnosis: {r.diagnosis.message}{truth}")
        if r.hang is not None:
            out.append(f"  {live_line(r)}")
        out.extend(f"    {line}" for line in ranks_text(r).splitlines())
        out.extend(f"  note: {n}" for n in r.notes)
    return "\n".join(out)


# -- HTML ------------------------------------------------------------------------------------
_TABLE = "style='border-collapse:collapse;margin:4px 0 8px 0'"
_TH = "style='text-align:left;padding:2px 10px 2px 0;border-bottom:1px solid #999'"
_TD = "style='text-align:left;padding:2px 10px 2px 0;vertical-align:top'"
_TDN = "style='text-align:right;padding:2px 10px 2px 0;vertical-align:top'"


def _status_span(value: str) -> str:
    return f"<span style='color:{STATUS_COLOUR.get(value, '#000')};font-weight:bold'>{html.escape(value)}</span>"


def _summary_table(results: Sequence[RunResult]) -> str:
    head = "".join(f"<th {_TH}>{h}</th>" for h in (
        "variant", "outcome", "culprit rank(s), diagnosed", "failed op", "ground truth", "named live after (s)",
        "group timeout (s)", "wall (s)"))
    rows = []
    for r in results:
        if r.ok or not r.has_ground_truth:
            truth = "–"
        else:
            mark = "agrees" if r.diagnosis_agrees else "<b style='color:#c62828'>DISAGREES</b>"
            truth = f"{_ranks(r.expected_culprits)} ({mark})"
        live = r.live_hang
        rows.append(
            "<tr>"
            f"<td {_TD}><code>{html.escape(r.variant)}</code></td><td {_TD}>{_status_span(r.outcome.value)}</td>"
            f"<td {_TD}>{_ranks(r.culprit_ranks)}</td><td {_TD}>{html.escape(r.failed_op or '–')}</td>"
            f"<td {_TD}>{truth}</td>"
            f"<td {_TDN}>{'–' if live is None else f'{live.detected_after_s:.1f}'}</td>"
            f"<td {_TDN}>{r.pg_timeout_s:g}</td><td {_TDN}>{r.wall_s:.1f}</td>"
            "</tr>"
        )
    return f"<table {_TABLE}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _ranks_table(r: RunResult) -> str:
    head = "".join(f"<th {_TH}>{h}</th>" for h in ("rank", "status", "error", "steps", "step median (ms)", "ran (s)"))
    rows = []
    for o in sorted(r.per_rank, key=lambda o: o.rank):
        err = o.error or ""
        rows.append(
            "<tr>"
            f"<td {_TDN}>{o.rank}</td><td {_TD}>{_status_span(o.status.value) if o.status.value != 'ok' else 'ok'}</td>"
            f"<td style='text-align:left;padding:2px 10px 2px 0;vertical-align:top;white-space:normal;max-width:50em'"
            f" title='{html.escape(err, quote=True)}'>{html.escape(short_error(err, 200))}</td>"
            f"<td {_TDN}>{o.steps}</td>"
            f"<td {_TDN}>{'' if o.step_time_median_s is None else f'{o.step_time_median_s * 1e3:.1f}'}</td>"
            f"<td {_TDN}>{'' if o.wall_s is None else f'{o.wall_s:.2f}'}</td>"
            "</tr>"
        )
    return f"<table {_TABLE}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _details(r: RunResult, *, opened: bool | None = None) -> str:
    lines = []
    if not r.ok:
        head = (f"From the trace alone: culprit rank(s) <b>{_ranks(r.culprit_ranks)}</b>, failed op "
                f"<b>{html.escape(str(r.failed_op))}</b>")
        if r.has_ground_truth:
            agree = "agrees with" if r.diagnosis_agrees else "<b style='color:#c62828'>DISAGREES with</b>"
            lines.append(f"{head}; this {agree} the ground truth ({_ranks(r.expected_culprits)}, "
                         f"{html.escape(str(r.expected_op))}).")
        else:
            lines.append(f"{head}: {html.escape(r.diagnosis.message if r.diagnosis else '')}")
    if r.hang is not None:
        lines.append(html.escape(live_line(r)) + ".")
    text = "".join(f"<div style='margin:2px 0'>{x}</div>" for x in lines)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    body = text + _ranks_table(r) + (f"<div>What the cluster did:</div><ul style='margin:2px 0'>{notes}</ul>" if notes else "")
    live = r.live_hang
    if live is not None and live.stacks:
        body += (
            "<details style='margin:2px 0 6px 0'><summary>every rank's Python stack when the stall was named "
            "(innermost frames, the workbook's own frames left out)</summary>"
            f"{stacks_html(live.stacks, live.where)}</details>"
        )
    is_open = (not r.ok) if opened is None else opened
    return (
        f"<details{' open' if is_open else ''} style='margin:4px 0'><summary><code>{html.escape(r.variant)}</code>: "
        f"{_status_span(r.outcome.value)}, per-rank details</summary><div style='margin-left:1.2em'>{body}</div></details>"
    )


def results_html(results: Sequence[RunResult]) -> str:
    """Runs as one HTML fragment: the summary table (one row per variant), then each variant's
    details (open for runs that failed)."""
    if not results:
        return ""
    return "<div>" + _summary_table(results) + "".join(_details(r) for r in results) + "</div>"


def result_html(r: RunResult) -> str:
    """One run (``RunResult._repr_html_``): its header line, then its details, open."""
    head = (f"<b>{html.escape(r.scenario)}</b> / <code>{html.escape(r.variant)}</code>: {_status_span(r.outcome.value)}"
            f" &nbsp; backend={r.backend}, world_size={r.world_size}, pg timeout={r.pg_timeout_s:g} s, "
            f"wall={r.wall_s:.1f} s")
    return f"<div>{head}{_details(r, opened=True)}</div>"


def _program_frames(stack: str, last_lines: int) -> list[str]:
    """The innermost ``last_lines`` lines of a rank's stack, without the frames above the rank
    program (IPython's exec, the engine's ``run_rank``) when they can be told apart."""
    lines = stack.rstrip().splitlines()
    starts = [i for i, x in enumerate(lines) if x.lstrip().startswith("File ") and x.rstrip().endswith("in run_rank")]
    if starts and starts[-1] + 2 < len(lines):
        lines = lines[starts[-1] + 2:]
    return lines[-last_lines:]


def stacks_html(stacks: Mapping[int, str], where: Mapping[int, str] | None = None, *, last_lines: int = 10) -> str:
    """Every rank's stack one below the other (full width, no wrapping, scrolls sideways), with
    where the rank was when the stall was named."""
    parts = []
    for r in sorted(stacks):
        at = f": <i>{html.escape(where[r])}</i>" if where and r in where else ""
        text = html.escape("\n".join(_program_frames(stacks[r], last_lines)))
        parts.append(f"<div style='margin:4px 0 0 0'><b>rank {r}</b>{at}</div>"
                     f"<pre style='white-space:pre;overflow-x:auto;font-size:11px;line-height:1.25;margin:0 0 4px 0;"
                     f"padding:4px;background:#f6f6f6'>{text}</pre>")
    return f"<div style='margin-left:1.2em'>{''.join(parts)}</div>"
