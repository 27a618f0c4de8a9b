"""``nccl-workbook lint``: argparse wiring only.

Contract with ``nccl_workbook.cli``: :func:`add_parsers` adds the subcommand with
``set_defaults(func=run_lint)``; ``run_lint(args) -> int`` returns the exit code: 0 clean, 1 when
something was found, 2 on bad input (a missing path, a file that does not parse: named in the
output, the other files still checked).

Usage::

    nccl-workbook lint train.py src/         # path:line: rule: why / fix / notebook
    nccl-workbook lint train.py --json       # {"findings": [...], "errors": [...]}
    nccl-workbook lint --no-imports a.py     # a.py only, not the local files it imports
"""

from __future__ import annotations

import argparse
import json

__all__ = ["add_parsers", "run_lint"]


def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``lint`` to the ``nccl-workbook`` command."""
    lint = subparsers.add_parser(
        "lint",
        help="find hang hazards (rank-only collectives, rank-0 work, uneven loops, ...) in training scripts",
        description=("Read Python training scripts (files, or folders of .py files) without running them and report "
                     "the patterns that make collectives time out: where, why, the fix, and the notebook that shows it. "
                     "Exit status: 0 clean, 1 hazards found, 2 a path missing or a file that does not parse."),
    )
    lint.add_argument("paths", nargs="+", metavar="PATH", help=".py files or folders")
    lint.add_argument("--json", action="store_true", help='print {"findings": [...], "errors": [...]}')
    lint.add_argument("--no-imports", dest="imports", action="store_false",
                      help="report only the files named, not the local files they import (engine.py, utils.py); "
                           "those are still read to follow calls into them (for a pre-commit hook on changed files)")
    lint.set_defaults(func=run_lint)


def run_lint(args: argparse.Namespace) -> int:
    from nccl_workbook.lint import lint_paths

    report = lint_paths(args.paths, imports=args.imports)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.render_text())    # bad paths included, each on a line "PATH: error: ..."
    return report.exit_code
