"""Example scripts that ship with the package, for the notebooks to read (never imported by the workbook).

- :data:`LINT_DEMO`: a small DDP training script with one hazard of each ``nccl-workbook lint``
  rule planted in it, the way they appear in real scripts (``notebooks/93_lint_your_script.ipynb``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["LINT_DEMO"]

#: path of the lint demo script (a file inside the installed package)
LINT_DEMO: Path = Path(__file__).with_name("lint_demo.py")
