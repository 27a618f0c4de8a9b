"""Triage: paste the log of a failed job, get what happened, which rank, and which notebook shows the fix.

Three steps, each usable alone:

1. :func:`parse_log` — any bytes -> :class:`Event` list (field names shared with the rest of the
   workbook: ``backend, kind, rank, seq_num, op_type, numel_in, numel_out, timeout_ms, ran_for_ms,
   pg_id, pg_name, last_enqueued, last_completed`` + ``line``/``line_no``), :func:`events_frame`
   for a tidy DataFrame;
2. :func:`summarize` — the job-level reading (:class:`JobSummary`): ranks reported, missing,
   behind, which ranks the log covers (``partial`` when fewer than the job had), the failing op,
   the earliest failure;
3. :func:`rank_causes` — ranked :class:`Finding` objects pointing at scenario notebooks
   (from the scenario registry, :func:`notebook_for`), with reasons, confidence and the fix.

:func:`triage_log` runs all three and returns a :class:`TriageReport` (text via ``render()``,
``to_json()``, HTML in Jupyter, ``plot()``). The CLI is ``nccl-workbook triage [FILE|-] [--json]``;
the notebook panel is :func:`nccl_workbook.triage.widget.triage_panel`.

Usage::

    from nccl_workbook.triage import triage_log, example_log_text
    report = triage_log(example_log_text())
    report.summary.ranks_missing   # (0,)
    report.top.scenario            # 'rank0-work-before-barrier'
"""

from __future__ import annotations

from importlib import resources

from nccl_workbook.triage.events import (
    EVENT_COLUMNS,
    FAILURE_KINDS,
    Backend,
    Event,
    EventKind,
    LogTally,
    events_frame,
)
from nccl_workbook.triage.findings import Confidence, Finding, notebook_for, rank_causes, scenario_notebooks
from nccl_workbook.triage.job import JobSummary, LogRankState, RankRow, summarize
from nccl_workbook.triage.parser import ParsedLog, normalize_text, parse_log, read_log
from nccl_workbook.triage.plots import plot_rank_events
from nccl_workbook.triage.report import TriageReport, render_text, triage_log

__all__ = [
    "Backend",
    "EventKind",
    "Event",
    "EVENT_COLUMNS",
    "FAILURE_KINDS",
    "LogTally",
    "events_frame",
    "parse_log",
    "read_log",
    "ParsedLog",
    "normalize_text",
    "JobSummary",
    "RankRow",
    "LogRankState",
    "summarize",
    "scenario_notebooks",
    "Confidence",
    "Finding",
    "notebook_for",
    "rank_causes",
    "TriageReport",
    "triage_log",
    "render_text",
    "plot_rank_events",
    "EXAMPLE_LOGS",
    "example_log_text",
]

#: bundled example logs (file names in ``nccl_workbook/data/example_logs``): a 4-GPU NCCL job whose rank 0
#: generated samples; Ctrl-C on a hung 4-rank gloo job (torch 2.13, made by
#: ``tests/data/logs/torch213/make_logs.py``) whose rank 3 was loading data
EXAMPLE_LOGS: tuple[str, ...] = ("rank0_sample_generation_4gpu.log", "ctrl_c_rank3_in_dataloader_gloo.log")


def example_log_text(name: str = EXAMPLE_LOGS[0]) -> str:
    """The text of a bundled example log (default: rank 0 generating samples, 4 GPUs)."""
    if name not in EXAMPLE_LOGS:
        raise KeyError(f"Unknown example log {name!r}; bundled: {', '.join(EXAMPLE_LOGS)}")
    return resources.files("nccl_workbook").joinpath("data", "example_logs", name).read_text(encoding="utf-8")
