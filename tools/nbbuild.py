"""Tiny helper to write a notebook from a list of (kind, source) cells, then execute it in place.

Used to author the workbook's notebooks; the .ipynb files are the source of truth afterwards.

    python tools/nbbuild.py SPEC.py     # SPEC.py defines NOTEBOOK (output path) and CELLS

Re-executing an existing notebook in place (to refresh its stored outputs) needs no spec:

    python tools/nbbuild.py --rerun notebooks/01_rank0_work_before_barrier.ipynb
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def build(cells: list[tuple], path: Path, *, execute: bool = True, timeout_s: int = 600) -> None:
    """``cells``: ``(kind, source)`` or ``(kind, source, True)`` for a code cell whose output nbval
    checks (the cell tag ``nbval-check-output``)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, src, *checked in cells:
        src = src.strip("\n")
        cell = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        if checked and checked[0]:
            cell.metadata["tags"] = ["nbval-check-output"]
        nb.cells.append(cell)
    if execute:
        NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)


def rerun(path: Path, timeout_s: int = 600) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)


if __name__ == "__main__":
    if sys.argv[1] == "--rerun":
        for p in sys.argv[2:]:
            rerun(Path(p))
        sys.exit(0)
    spec_path = Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("cells", spec_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    build(mod.CELLS, Path(mod.NOTEBOOK), execute="--no-exec" not in sys.argv)
