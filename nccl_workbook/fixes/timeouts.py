"""Timeouts that actually apply: what sets a process group's timeout, and how to read it back
(seeds 000, 001, 002, 004).

A collective waits until the timeout of *its process group* runs out. In torch 2.13 that timeout
comes from exactly one place: the ``timeout=`` argument of ``init_process_group`` (the default
group) or ``new_group`` (any other group); without one, torch uses its built-in default at the
moment the group is created (``distributed_c10d._get_default_timeout``: 30 minutes for gloo,
10 minutes for NCCL). ``dist.barrier(timeout=...)`` overrides it for one call. Nothing else does:

- ``NCCL_TIMEOUT`` is read by nobody (no string in torch's libraries or Python code; NCCL has no
  such variable);
- a variable like ``NCCL_TIMEOUT_MINUTES`` works only if your script reads it and passes the value
  to ``timeout=`` (seed 000 does: :func:`timeout_from_env`);
- ``torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT = ...`` creates a new attribute that
  nothing reads (the module has no such name; the default is read from ``default_pg_timeout``);
- ``NCCL_ASYNC_ERROR_HANDLING`` / ``NCCL_BLOCKING_WAIT`` are deprecated aliases of
  ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` / ``TORCH_NCCL_BLOCKING_WAIT``, read only by the NCCL backend:
  they change *how* a timeout surfaces (the watchdog tears the process down, or the waiting call
  raises), not *when*.

:func:`group_timeout_s` reads the timeout a group really got from torch's own objects, so a job can
log it at start-up instead of trusting its settings. For one legitimately long wait (a checkpoint
save on rank 0), prefer a long timeout on that wait only (:func:`wait_with_timeout`, or a side group,
:func:`~nccl_workbook.fixes.new_side_group` + :func:`~nccl_workbook.fixes.wait_for_main`) over raising
the timeout of every collective in the job.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["group_timeout_s", "timeout_from_env", "wait_with_timeout", "barrier_with_timeout"]

T = TypeVar("T")

_UNITS = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0}


def group_timeout_s(group: Any = None) -> float:
    """The timeout (seconds) that ``group`` (default: the default group) actually has, read from
    its backend's options (``ProcessGroupGloo`` / ``ProcessGroupNCCL`` ``.options._timeout``).

    Example (log it once, right after init)::

        dist.init_process_group("nccl", timeout=timeout_from_env("NCCL_TIMEOUT_MINUTES", 30))
        print(f"process-group timeout: {group_timeout_s():.0f} s")
    """
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    pg = group if group is not None else c10d._get_default_group()
    if pg is None or pg == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this rank is not a member of the group; only members can read its timeout")
    timeouts = set()
    for device in pg._device_types:
        try:
            timeouts.add(pg._get_backend(device).options._timeout.total_seconds())
        except (RuntimeError, AttributeError):  # a backend without options (e.g. a fake one)
            continue
    if not timeouts:
        raise ValueError(f"could not read a timeout from group {getattr(pg, 'group_name', pg)!r}: no backend options")
    return max(timeouts)


def timeout_from_env(name: str, default: float, *, unit: str = "minutes") -> datetime.timedelta:
    """Seed 000's pattern done explicitly: read a variable *your script* owns and turn it into the
    ``timeout=`` of ``init_process_group`` / ``new_group``. The variable works because this code reads
    it; torch and NCCL never look at it.

    Example::

        dist.init_process_group("nccl", timeout=timeout_from_env("NCCL_TIMEOUT_MINUTES", 30))

    >>> timeout_from_env("NWB_DOCTEST_UNSET_VARIABLE", 2.5, unit="seconds")
    datetime.timedelta(seconds=2, microseconds=500000)
    """
    if unit not in _UNITS:
        raise ValueError(f"unit must be one of {sorted(_UNITS)}, got {unit!r}")
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        value = float(default)
    else:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"${name}={raw!r} is not a number of {unit}") from None
    if not value > 0:
        raise ValueError(f"${name} must be > 0 {unit}, got {value}")
    return datetime.timedelta(seconds=value * _UNITS[unit])


def wait_with_timeout(fn: Callable[..., T], *args: Any, timeout_s: float, group: Any = None, main_rank: int = 0,
                      **kwargs: Any) -> T | None:
    """Run ``fn`` on ``main_rank`` only, then meet every rank at a barrier that has its own timeout
    (``dist.barrier(timeout=...)``): the one long wait gets a long timeout, every other collective
    keeps the group's short one. Returns ``fn``'s result on the main rank, ``None`` elsewhere.

    Measured on gloo (torch 2.13, 4 ranks): a per-call timeout longer than the group's lets the
    barrier wait past the group timeout, and the group stays usable afterwards; a shorter one fires
    at the per-call value. On torch 2.11 (no ``barrier(timeout=)``) the barrier runs on a gloo group
    with that timeout (:func:`barrier_with_timeout`); so it ran on one H200 in a 1-rank NCCL group
    whose 2 s timeout it outlasted. NCCL's own per-call barrier timeout (2.13) was not run on a GPU.

    Example::

        wait_with_timeout(save_checkpoint, model, path, timeout_s=3600)   # instead of rank-0 work + barrier
    """
    import torch.distributed as dist

    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    result = fn(*args, **kwargs) if dist.get_rank() == main_rank else None
    barrier_with_timeout(timeout_s, group=group)
    return result


#: (group, timeout_s) -> the gloo group that stands in for ``barrier(timeout=)`` on an older torch
_SIDE_BARRIERS: dict[tuple[int, float], Any] = {}


def barrier_with_timeout(timeout_s: float, *, group: Any = None) -> None:
    """``dist.barrier(group=group, timeout=timeout_s)``: one barrier with its own timeout. On a torch
    whose ``barrier`` takes no ``timeout`` (2.11 has none; 2.13 has it), the barrier runs on a gloo
    group of the same ranks created with that timeout, once per (group, timeout) and kept: every
    rank calls this at the same point, so every rank creates it at the same point too."""
    import inspect

    import torch.distributed as dist

    if "timeout" in inspect.signature(dist.barrier).parameters:
        dist.barrier(group=group, timeout=datetime.timedelta(seconds=timeout_s))
        return
    key = (id(group), float(timeout_s))
    side = _SIDE_BARRIERS.get(key)
    if side is None or side not in dist.distributed_c10d._world.pg_map:  # none yet, or destroyed since
        ranks = None if group is None else dist.get_process_group_ranks(group)
        side = _SIDE_BARRIERS[key] = dist.new_group(ranks=ranks, backend="gloo",
                                                     timeout=datetime.timedelta(seconds=timeout_s))
    dist.barrier(group=side)
