"""``nccl-workbook triage`` and ``nccl-workbook doctor``: argparse wiring only.

Contract with ``nccl_workbook.cli``: :func:`add_parsers` adds both subcommands, each with
``set_defaults(func=handler)`` where ``handler(args) -> int`` returns the exit code.

Exit codes:

- ``triage``: 0 when a report was produced (whatever it says), 2 when the file cannot be read.
- ``doctor``: 0 when nothing at ``warning`` or ``error`` level was found, 1 otherwise.

Usage::

    nccl-workbook triage job.log            # readable report
    cat job.log | nccl-workbook triage -    # from stdin
    nccl-workbook triage job.log --json     # {"events": [...], "summary": {...}, "findings": [...]}
    nccl-workbook doctor --pg-timeout-s 600 --dataloader-timeout-s 600 --json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

__all__ = ["add_parsers", "run_triage", "run_doctor"]


def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``triage`` and ``doctor`` to the ``nccl-workbook`` command."""
    triage = subparsers.add_parser(
        "triage",
        help="read the log of a failed job: what happened, which rank, which notebook shows the fix",
        description=("Parse a distributed-training log (any size, any bytes) and report the failing collective, "
                     "the ranks that reported and the ones missing, and the likely causes with their fixes."),
    )
    triage.add_argument("file", nargs="?", default="-", help="log file, or - for stdin (default)")
    triage.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    triage.set_defaults(func=run_triage)

    doctor = subparsers.add_parser(
        "doctor",
        help="check the environment and training settings for no-op, deprecated or harmful settings",
        description=("Check NCCL/torch environment variables (this process's environment) and, when given, "
                     "training settings: timeouts, DataLoader workers against the open-file limit."),
    )
    doctor.add_argument("--json", action="store_true", help="print a JSON list of findings")
    doctor.add_argument("--pg-timeout-s", type=float, default=None, help="init_process_group(timeout=) in seconds")
    doctor.add_argument("--dataloader-timeout-s", type=float, default=None, help="DataLoader(timeout=) in seconds")
    doctor.add_argument("--workers-per-rank", type=int, default=None, help="DataLoader workers per rank")
    doctor.add_argument("--ranks-per-host", type=int, default=None, help="ranks (processes) per host")
    doctor.add_argument("--open-file-limit", type=int, default=None,
                        help="RLIMIT_NOFILE of the ranks (default: this process's soft limit)")
    doctor.add_argument("--debugging", action="store_true", help="also report missing debug settings")
    doctor.set_defaults(func=run_doctor)


def _read(source: str) -> bytes:
    if source == "-":
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def run_triage(args: argparse.Namespace) -> int:
    from nccl_workbook.triage.report import triage_log

    try:
        data = _read(args.file)
    except OSError as exc:
        print(f"nccl-workbook triage: cannot read {args.file!r}: {exc.strerror or exc}. "
              "Pass a log file path, or - to read stdin.", file=sys.stderr)
        return 2
    report = triage_log(data)
    text = json.dumps(report.to_json(), indent=1) + "\n" if args.json else report.render()
    return _write(text, 0)


def run_doctor(args: argparse.Namespace) -> int:
    from nccl_workbook.doctor import Severity, TrainingSettings, check, render_text

    settings = TrainingSettings.from_process(
        pg_timeout_s=args.pg_timeout_s,
        dataloader_timeout_s=args.dataloader_timeout_s,
        workers_per_rank=args.workers_per_rank,
        ranks_per_host=args.ranks_per_host,
        open_file_limit=args.open_file_limit,
        debugging=args.debugging or None,
    )
    findings = check(settings=settings)
    text = json.dumps([f.to_json() for f in findings], indent=1) + "\n" if args.json else render_text(findings)
    return _write(text, 1 if any(f.severity in (Severity.ERROR, Severity.WARNING) for f in findings) else 0)


def _write(text: str, code: int) -> int:
    """Print ``text``; a closed pipe (``| head``) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code
