"""Fixes for "rank 0 works while the others wait in a collective" (seed 002, seed 000's end barrier).

The broken pattern::

    if rank == 0:
        generate_samples()        # longer than the process-group timeout
    dist.barrier()                # ranks 1..N-1 wait here and time out

Three fixes, from weakest to best:

1. A longer group timeout (``init_process_group(timeout=...)``, the seed's fix). It works, but
   every real hang anywhere in training now takes that long to be detected. Nothing to import.
2. :func:`wait_for_main` on a *side group*: the waiting ranks wait on a dedicated gloo group with
   its own long timeout, while the main group keeps its short one for everything else.
3. :func:`sharded`: every rank does its share of the work, so nobody idles and the final
   gather sees all ranks arrive at about the same time.

All functions must be called by every rank, in the same order, like any collective.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["new_side_group", "wait_for_main", "shard_indices", "sharded"]

T = TypeVar("T")


def new_side_group(timeout_s: float, *, backend: str = "gloo") -> Any:
    """Create a process group over all ranks with its own (long) timeout, for waiting only.

    Gloo by default: waiting on a CPU group occupies no GPU stream and no NCCL communicator, so
    the NCCL watchdog of the main group has nothing outstanding to time out on.

    Example::

        dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=5))
        side = new_side_group(timeout_s=2 * 3600)   # all ranks, once, right after init
    """
    import torch.distributed as dist

    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    return dist.new_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))


def wait_for_main(fn: Callable[..., T], *args: Any, group: Any, main_rank: int = 0, **kwargs: Any) -> T | None:
    """Run ``fn`` on ``main_rank`` only; every other rank waits for it on ``group`` (a side group
    from :func:`new_side_group`). Returns ``fn``'s result on the main rank, ``None`` elsewhere.

    Example::

        side = new_side_group(timeout_s=3600)
        for epoch in range(epochs):
            train_one_epoch()
            wait_for_main(generate_samples, model, group=side)   # instead of rank-0 work + barrier
    """
    import torch.distributed as dist

    result = fn(*args, **kwargs) if dist.get_rank() == main_rank else None
    dist.barrier(group=group)
    return result


def shard_indices(n_items: int, rank: int, world_size: int) -> range:
    """The items rank ``rank`` handles when ``n_items`` are split as evenly as possible.

    >>> [list(shard_indices(10, r, 4)) for r in range(4)]
    [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    if n_items < 0:
        raise ValueError(f"n_items must be >= 0, got {n_items}")
    base, extra = divmod(n_items, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def sharded(fn: Callable[[int], T], n_items: int, *, group: Any = None) -> list[T]:
    """Compute ``fn(i)`` for ``i in range(n_items)`` split across all ranks; every rank gets the
    full list, in index order (an ``all_gather_object`` at the end).

    Example::

        samples = sharded(lambda i: generate_sample(model, seed=i), n_items=16)
        if rank == 0:
            save_grid(samples)
    """
    import torch.distributed as dist

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    mine = [(i, fn(i)) for i in shard_indices(n_items, rank, world)]
    gathered: list[Sequence[tuple[int, T]] | None] = [None] * world
    dist.all_gather_object(gathered, mine, group=group)
    out = sorted((pair for part in gathered if part for pair in part), key=lambda p: p[0])
    return [v for _, v in out]
