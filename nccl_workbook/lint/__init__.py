"""``nccl-workbook lint``: find the hang hazards of the workbook's scenarios in a training script, before it runs.

Most collective timeouts are code that makes ranks diverge on the CPU. Each rule below is one such
pattern, read from the source with :mod:`ast` (nothing is imported or run), and each finding says
where, why it can hang, the fix (a :mod:`nccl_workbook.fixes` helper where there is one) and the
notebook that reproduces it:

- ``collective-in-rank-branch``: a collective (or a call that implies one) that only some ranks reach;
- ``rank0-long-work-before-collective``: evaluation, sampling, saving or logging on some ranks while
  the others wait in the next collective (DDP's gradient all-reduce included);
- ``uneven-collective-count``: a collective per pass of a loop whose length differs per rank, or
  after an early ``break``/``return`` on some ranks;
- ``exception-on-one-rank``: an exception caught around a step or a collective, and the rank goes on;
- ``noop-timeout-setting``: ``NCCL_TIMEOUT``, a late ``_DEFAULT_PG_TIMEOUT``, deprecated aliases;
- ``dataloader-timeout-ge-pg-timeout``: a ``DataLoader(timeout=)`` not well below the group timeout.

Known limits: names are matched by spelling and followed through plain assignments, through
functions of the same file and of the user's other files (local imports, read beside and above the
file; one level of callers for "what comes next", across the files linted together: see
:mod:`nccl_workbook.lint.project`); installed packages, class hierarchies and values in containers
are not followed. See ``tests/data/lint/SOURCES.md`` for
recall and false reports measured on public scripts.

Usage::

    from nccl_workbook.lint import lint_paths
    report = lint_paths(["train.py"])
    report.exit_code, [(f.line, f.rule.value) for f in report.findings]

or ``nccl-workbook lint train.py [--json]``.
"""

from __future__ import annotations

from pathlib import Path

from nccl_workbook.lint.api import LintError, LintFinding, LintReport, lint_file, lint_paths, lint_source, python_files
from nccl_workbook.lint.rules import RULES, Rule, RuleInfo
from nccl_workbook.doctor import NOOP_SETTINGS

#: a small DDP script with one planted hazard per rule (``notebooks/93_lint_your_script.ipynb``); it sits
#: with the other example scripts in ``nccl_workbook/examples/``
DEMO_SCRIPT: Path = Path(__file__).resolve().parent.parent / "examples" / "lint_demo.py"

__all__ = ["DEMO_SCRIPT", "LintError", "LintFinding", "LintReport", "lint_file", "lint_paths", "lint_source", "python_files",
           "RULES", "Rule", "RuleInfo", "NOOP_SETTINGS"]
