"""``nccl-workbook fr FOLDER``: argparse wiring only (the work is in :mod:`nccl_workbook.flight`).

Contract with ``nccl_workbook.cli``: :func:`add_parsers` adds the subcommand with
``set_defaults(func=handler)``, ``handler(args) -> int`` the exit code: 0 when a report was
produced (whatever it says), 2 when the folder cannot be read as flight-recorder dumps.

Usage::

    nccl-workbook fr ./fr_dumps                       # report: torch's analyzer + the diagnosis
    nccl-workbook fr ./fr_dumps --json                # one JSON object
    nccl-workbook fr ./fr_dumps --as-of-first-timeout # gloo dumps cut as NCCL would have dumped
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_parsers", "run_fr"]


def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``fr`` (alias ``flight-recorder``) to the ``nccl-workbook`` command."""
    p = subparsers.add_parser(
        "fr",
        aliases=["flight-recorder"],
        help="read a folder of torch flight-recorder dumps: torch's analyzer verdict and the workbook's diagnosis",
        description=("Load one flight-recorder dump per rank (torch's pickle, named <prefix><rank>, as written to "
                     "$TORCH_FR_DUMP_TEMP_FILE on a timeout), fix gloo dumps up for torch's analyzer, run it, "
                     "and diagnose the late or missing rank from the same dumps."),
    )
    p.add_argument("folder", help="folder with one dump per rank")
    p.add_argument("--prefix", default=None, help="file name prefix before the rank (default: inferred)")
    p.add_argument("--world-size", type=int, default=None, help="ranks in the job (default: from the dumps)")
    p.add_argument("--as-of-first-timeout", action="store_true",
                   help="cut every dump at the moment the first collective timed out (what NCCL's dump-on-timeout holds)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.set_defaults(func=run_fr)


def run_fr(args: argparse.Namespace) -> int:
    """Handler of ``nccl-workbook fr``: 0 when a report was produced, 2 on unreadable input."""
    from nccl_workbook.flight import FlightDumpError, analyze_dumps, load_dumps

    try:
        if args.world_size is not None and args.world_size < 1:
            raise FlightDumpError(f"--world-size must be at least 1, got {args.world_size}")
        dumps = load_dumps(args.folder, prefix=args.prefix, world_size=args.world_size)
        report = analyze_dumps(dumps, cut_at_first_timeout=args.as_of_first_timeout)
    except (FlightDumpError, OSError) as e:
        print(f"nccl-workbook fr: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(report.to_json(), indent=1) + "\n" if args.json else report.render())
    return 0
