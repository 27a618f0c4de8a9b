"""``nccl-workbook attach``: argparse wiring only (the work is in :mod:`nccl_workbook.attach`).

Contract with ``nccl_workbook.cli``: :func:`add_parsers` adds the subcommand with
``set_defaults(func=handler)``, ``handler(args) -> int`` the exit code: 0 when a report was
produced (whatever it says), 1 when no job was found, 2 on misuse (several jobs and no ``--pid``,
a ``--pid`` of no job, unreadable ``--merge`` files).

Usage::

    nccl-workbook attach                       # the only job on this host
    nccl-workbook attach --pid 4967            # the job of this launcher / rank pid
    nccl-workbook attach --native --stacks     # with C++ frames, and print every rank's stack
    nccl-workbook attach --json > host-a.json  # on every host of a multi-node job, then:
    nccl-workbook attach --merge host-a.json host-b.json
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_parsers", "run_attach"]


def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``attach`` to the ``nccl-workbook`` command."""
    p = subparsers.add_parser(
        "attach",
        help="where is every rank of a job that hangs now? py-spy stacks, classified, the odd ranks named",
        description=("Find the rank processes of a running distributed job on this host (RANK/WORLD_SIZE in "
                     "their environment), read every rank's stack with py-spy, say where each one is (which "
                     "collective, or computing / loading data / I/O / sleeping) and name the odd ranks out. "
                     "Read-only for the job. Needs root or ptrace permission for py-spy."),
    )
    p.add_argument("--pid", type=int, default=None,
                   help="a launcher (torchrun) or rank pid, to pick one job when several run here")
    p.add_argument("--native", action="store_true", help="also read C/C++ frames (slower: ~0.5 s per rank)")
    p.add_argument("--interval-s", type=float, default=0.5,
                   help="how long to watch the ranks for progress before reading stacks (default 0.5)")
    p.add_argument("--timeout-s", type=float, default=10.0, help="limit for each py-spy dump (default 10)")
    p.add_argument("--stacks", action="store_true", help="print every rank's stack after the summary")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    p.add_argument("--merge", nargs="+", metavar="FILE", default=None,
                   help="merge `attach --json` files of several hosts into one answer (attaches to nothing)")
    p.set_defaults(func=run_attach)


def run_attach(args: argparse.Namespace) -> int:
    """Handler of ``nccl-workbook attach``."""
    from nccl_workbook.attach import AttachError, attach, load_report, merge

    try:
        if args.merge:
            report = merge([load_report(f) for f in args.merge])
        else:
            if args.interval_s < 0 or args.timeout_s <= 0:
                raise ValueError(f"--interval-s must be >= 0 and --timeout-s > 0, got {args.interval_s}, {args.timeout_s}")
            report = attach(args.pid, native=args.native, interval_s=args.interval_s, timeout_s=args.timeout_s)
    except AttachError as e:
        print(f"nccl-workbook attach: {e}", file=sys.stderr)
        return 1 if str(e).startswith("no distributed job") else 2
    except ValueError as e:
        print(f"nccl-workbook attach: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print(report.render(stacks=args.stacks))
    return 0
