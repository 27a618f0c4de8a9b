"""Fixes for "Too many open files" in a rank's DataLoader (seed 000 §4), and the numbers behind them.

The broken pattern: many DataLoader workers per rank under a low open-file limit
(``ulimit -n``, ``RLIMIT_NOFILE``). With torch's default sharing strategy on Linux
(``file_descriptor``), every tensor a worker hands to the main process travels as an open file
descriptor, and the main process holds one for each tensor of every batch it has received and not
yet freed, including the batches that arrived out of order while it waits for the next one. Its
open-file count therefore grows with *workers per rank* × ``prefetch_factor`` × *tensors per
batch* (measured in notebook 05), plus a few descriptors per worker for its pipes. When it reaches
the limit, the rank's loader raises ``RuntimeError: Too many open files. Communication with the
workers is no longer possible. …`` and the other ranks wait in their next collective.

The limit is per process: what matters is each rank's own workers, not the total across ranks.

Fixes (every one measured in notebook 05):

1. fewer workers per rank (and/or a smaller ``prefetch_factor``): fewer descriptors, in proportion;
2. :func:`use_file_system_sharing`: tensors travel as shared-memory *file names*, not descriptors,
   so the count no longer grows with the tensors in flight;
3. :func:`raise_open_file_limit` at start-up: the soft limit up to the hard limit (what
   ``ulimit -n`` does in a shell; only an administrator can raise the hard limit).

Count what a process has open with :func:`open_fd_count` (``/proc/self/fd``); ``lsof -p PID``
also lists memory-mapped files and the working directory, so it over-counts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["FileLimit", "open_fd_count", "open_file_limit", "raise_open_file_limit", "use_file_system_sharing",
           "sharing_strategy"]

#: the soft limit used when the hard limit is "unlimited"
_UNLIMITED_CAP = 1 << 20

#: keeps the tensor that started this process's shared-memory manager alive
_KEEP: list[Any] = []


@dataclass(frozen=True)
class FileLimit:
    """The open-file limit of this process before and after :func:`raise_open_file_limit`."""

    soft_before: int
    soft: int
    hard: int

    @property
    def raised(self) -> bool:
        return self.soft > self.soft_before


def open_fd_count() -> int:
    """How many file descriptors this process has open now (``/proc/self/fd`` on Linux,
    ``/dev/fd`` elsewhere), not counting the one used to list them."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder)) - 1
        except OSError:
            continue
    raise OSError("cannot count open files: neither /proc/self/fd nor /dev/fd can be listed on this system")


def open_file_limit() -> tuple[int, int]:
    """This process's ``RLIMIT_NOFILE`` as (soft, hard); "unlimited" is ``resource.RLIM_INFINITY``."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return int(soft), int(hard)


def raise_open_file_limit(target: int | None = None) -> FileLimit:
    """Raise this process's soft open-file limit to ``target`` (default: the hard limit), never
    above the hard limit and never lower than it already is. Call it at start-up, before the
    DataLoaders start their workers (they inherit the limit).

    Only the soft limit can be raised without privileges; when the hard limit itself is too low,
    it has to be raised where the job is started (``/etc/security/limits.conf``, the container's
    ``--ulimit nofile=…``, the scheduler's settings).

    Example::

        from nccl_workbook.fixes import raise_open_file_limit
        limit = raise_open_file_limit()
        print(f"open files: soft limit {limit.soft_before} -> {limit.soft} (hard {limit.hard})")
    """
    import resource

    soft, hard = open_file_limit()
    if target is not None and target < 1:
        raise ValueError(f"target must be a positive number of files, got {target}")
    ceiling = _UNLIMITED_CAP if hard == resource.RLIM_INFINITY else hard
    want = ceiling if target is None else min(target, ceiling)
    if soft != resource.RLIM_INFINITY and want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    new_soft, _ = open_file_limit()
    return FileLimit(soft_before=soft, soft=new_soft, hard=hard)


def use_file_system_sharing(*, start_manager: bool = True) -> str:
    """Switch ``torch.multiprocessing`` to the ``file_system`` sharing strategy; returns the
    strategy that was in use. Call it at start-up, before creating DataLoaders (forked workers
    inherit it).

    With ``file_system``, each process that shares tensors talks to a ``torch_shm_manager`` helper
    process. ``start_manager=True`` starts this process's helper now (sharing a one-element
    tensor), so that forked workers use it instead of each starting their own: measured here, a
    helper costs 0.5-1 s of CPU to start, and 8 workers on each of 4 ranks starting theirs at the
    same time took 11 s before the first batch. The helpers exit with the process that uses them.

    Caveat (torch docs): if a process is killed, shared-memory files it created may stay in
    ``/dev/shm`` until removed.

    Example::

        from nccl_workbook.fixes import use_file_system_sharing
        use_file_system_sharing()
        loader = DataLoader(dataset, batch_size=32, num_workers=8)
    """
    import torch
    import torch.multiprocessing as tmp

    before = tmp.get_sharing_strategy()
    tmp.set_sharing_strategy("file_system")
    if start_manager:
        _KEEP.append(torch.zeros(1).share_memory_())
    return str(before)


@contextlib.contextmanager
def sharing_strategy(name: str, *, start_manager: bool = True) -> Iterator[None]:
    """Use sharing strategy ``name`` inside the block and restore the previous one after it (for
    code that must leave the process as it found it: tests, notebooks, the workbook's ranks)."""
    import torch.multiprocessing as tmp

    if name not in tmp.get_all_sharing_strategies():
        raise ValueError(f"unknown sharing strategy {name!r}; this system has {sorted(tmp.get_all_sharing_strategies())}")
    before = tmp.get_sharing_strategy()
    try:
        if name == "file_system":
            use_file_system_sharing(start_manager=start_manager)
        else:
            tmp.set_sharing_strategy(name)
        yield
    finally:
        tmp.set_sharing_strategy(before)
