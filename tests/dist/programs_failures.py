"""Rank programs for tests/dist/test_failure_scenarios.py (module-level: pickled by reference)."""

from __future__ import annotations

from typing import Any


def count_children(ctx: Any, params: None) -> dict[str, Any]:
    """How many child processes this engine has (its ipyparallel nanny, plus any data-loader
    worker left behind)."""
    import psutil

    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return {"children": len(kids)}

