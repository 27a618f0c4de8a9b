"""Data-loader settings that make a stalled loader fail as a *data* error, on its own rank, first.

The broken pattern (seed 000 §2): ``DataLoader(timeout=600)`` next to the default 10-minute
process-group timeout. When one rank's loader stalls (a hung read on shared storage, a stuck
worker), the other ranks are already waiting in the next collective. Both clocks start at about
the same moment and run out at about the same moment, so which error the job log shows first is a
race, and three ranks out of four report a *collective* timeout that names no data at all.

The fix is a loader timeout well below the group timeout: the stalled rank then raises
``DataLoader timed out after N seconds`` long before any collective can time out, and that is the
first error in the job (add :class:`nccl_workbook.fixes.FailFast` so that every rank stops on it
at once, naming the stalled rank). The seed's other change, fewer workers and a smaller prefetch,
lowers the number of open files and processes (see the fd-exhaustion scenario); it does not change
when a stall is detected.

Usage::

    from nccl_workbook.fixes import loader_timeout_for, loader_problems, shutdown_workers

    pg_timeout_s = 1800
    dist.init_process_group("nccl", timeout=timedelta(seconds=pg_timeout_s))
    loader = DataLoader(ds, batch_size=32, num_workers=4, prefetch_factor=2,
                        timeout=loader_timeout_for(pg_timeout_s))      # 450 s
    assert not loader_problems(loader, pg_timeout_s)
    it = iter(loader)
    try:
        train(it)
    finally:
        shutdown_workers(it)     # now, not whenever the iterator is garbage-collected
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["loader_timeout_for", "loader_problems", "shutdown_workers"]

log = logging.getLogger(__name__)


def loader_timeout_for(pg_timeout_s: float, *, fraction: float = 0.25) -> float:
    """A DataLoader ``timeout`` that fires well before the process-group timeout:
    ``fraction`` of it (a quarter by default).

    >>> loader_timeout_for(600)
    150.0
    >>> loader_timeout_for(3, fraction=1/3)
    1.0
    """
    if not pg_timeout_s > 0:
        raise ValueError(f"pg_timeout_s must be > 0, got {pg_timeout_s}")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be between 0 and 1 (exclusive), got {fraction}: the loader must give up first")
    return round(pg_timeout_s * fraction, 3)


def loader_problems(loader: Any, pg_timeout_s: float, *, max_fraction: float = 0.5) -> list[str]:
    """What is wrong with a DataLoader's timeout next to a process-group timeout (empty: nothing).

    ``loader`` is a ``torch.utils.data.DataLoader`` (anything with ``num_workers`` and
    ``timeout``). A loader without workers has no timeout: the main process reads the data itself
    (and torch 2.13 refuses a timeout there when iterating).
    """
    problems: list[str] = []
    workers = int(getattr(loader, "num_workers", 0) or 0)
    timeout = float(getattr(loader, "timeout", 0) or 0)
    if workers == 0:
        if timeout > 0:
            problems.append(f"DataLoader timeout {timeout:g} s needs num_workers > 0: iterating it raises "
                            "AssertionError ('_SingleProcessDataLoaderIter requires timeout == 0')")
        return problems  # otherwise no timeout applies: a stall is a stall of the main process
    if timeout == 0:
        problems.append(f"DataLoader has {workers} workers and no timeout: a stuck worker waits forever, and the "
                        f"other ranks report a collective timeout after {pg_timeout_s:g} s instead")
    elif timeout >= max_fraction * pg_timeout_s:
        problems.append(f"DataLoader timeout {timeout:g} s is not well below the process-group timeout "
                        f"{pg_timeout_s:g} s: a stall may show up as a collective timeout on the other ranks first; "
                        f"use <= {loader_timeout_for(pg_timeout_s):g} s")
    return problems


def shutdown_workers(iterator: Any) -> None:
    """Shut a DataLoader iterator's worker processes down now.

    torch does it when the iterator is garbage-collected, which an exception's traceback can
    delay (the iterator stays referenced from the failed frames) until the exception is gone. This
    calls the iterator's own shutdown (torch 2.13's ``_shutdown_workers``: join each worker for up
    to 5 s, then terminate it); it does nothing for an iterator without workers.
    """
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is None:
        return
    try:
        shutdown()
    except Exception as e:  # noqa: BLE001 - best effort, torch kills what did not join
        log.warning("shutting the DataLoader workers down failed: %s", e)
