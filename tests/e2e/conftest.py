"""Browser end-to-end tests: marked ``browser`` (deselect locally with ``-m "not browser"`` or skip with
``NCCL_WORKBOOK_SKIP_BROWSER=1``; never skipped where ``$CI`` is set), and the folder with their
screenshots named in pytest's closing summary."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: screenshots of the last run (gitignored); $NCCL_WORKBOOK_E2E_OUT overrides
OUT_DIR = Path(os.environ.get("NCCL_WORKBOOK_E2E_OUT") or Path(__file__).resolve().parent / "out")

_written: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.browser)


@pytest.fixture
def screenshot_dir(request: pytest.FixtureRequest) -> Path:
    """``tests/e2e/out/<test name>/``, emptied first; named at the end of the pytest run."""
    path = OUT_DIR / request.node.name
    if path.exists():
        for f in path.iterdir():
            if f.is_file():
                f.unlink()
    path.mkdir(parents=True, exist_ok=True)
    _written.append(str(path))
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for path in _written:
        terminalreporter.write_line(f"browser e2e screenshots: {path}/")
