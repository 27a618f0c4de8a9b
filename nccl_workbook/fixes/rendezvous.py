"""One rank reaches ``init_process_group`` long after the others (issue 17, scenario
``init-rendezvous-timeout``): fixes, from the weakest to the best.

The broken pattern, as many training scripts have it::

    if local_rank == 0:
        prepare_shard()                     # download, untar, tokenise: minutes on one rank
    dist.init_process_group("nccl", timeout=timedelta(minutes=10))

The ranks that arrive on time wait inside ``init_process_group`` for the late one, under the init
timeout (the same ``timeout=`` as every later collective), and fail in the rendezvous, far from
the cause. Measured on torch 2.13 (gloo, ``init_method="tcp://"`` or ``env://`` with rank 0 hosting
the store, 4 ranks, rank 2 six seconds late, 3 s timeout): rank 0 raises ``DistStoreError: Timed out
after 4 seconds waiting for clients. 3/4 clients joined.``, ranks 1 and 3 ``DistStoreError: wait
timeout after 3000ms, keys: /default_pg/0//cpu//0/0`` (a key of *rank 0*, not of the late rank), and
the late rank, arriving after they gave up, ``DistNetworkError: The client socket has timed out after
3000ms while trying to connect to (127.0.0.1, PORT)``. Under torchrun (the agent hosts the store) the
early ranks' key names the late rank instead: ``keys: /default_pg/0//cpu//0/2``. The store-based
barrier (``Timed out initializing process group in store based barrier``) does not appear: torch 2.13
runs it only with ``TORCH_DIST_INIT_BARRIER=1`` (default 0) and only after the backend exists, and
the gloo rendezvous before it fails first (measured with 0 and 1: the same messages).

Fixes:

- :func:`set_group_timeout`: a long timeout for init and the first step, then a short one for
  training (the pattern large training codebases use). Measured on gloo, torch 2.13: after
  ``torch.distributed.distributed_c10d._set_pg_timeout`` (private; what this calls) the group's
  backend options report the new value and a collective with a late peer fails after it (1.52 s
  for a 1.5 s setting, on a group made with 20 s). A new group (``new_group(timeout=)``, also
  measured: 1.53 s) is the public alternative, but every collective must then name it.
- :func:`store_barrier`: every rank meets at a barrier on the TCPStore, with its own (long) timeout,
  before ``init_process_group``; on a timeout it names the ranks that did not arrive.
- :func:`prepare_after_init`: the best, with preparation outside the launcher (a job step of its
  own: ``srun python prepare.py && srun torchrun train.py``): init first, on time, on every rank;
  then every rank prepares its shard; then one barrier with a timeout long enough for preparation.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any, TypeVar

from nccl_workbook.fixes.timeouts import group_timeout_s

__all__ = ["set_group_timeout", "open_store", "store_barrier", "StoreBarrierTimeout", "prepare_after_init"]

T = TypeVar("T")


def set_group_timeout(timeout_s: float, group: Any = None) -> float:
    """Change the timeout of an existing group (default: the default group) and return the timeout
    it then really has (read back from torch's backend options, :func:`group_timeout_s`).

    Uses ``torch.distributed.distributed_c10d._set_pg_timeout`` (private in torch 2.13, present since
    2.2). Measured on gloo: takes effect for the next collective. On NCCL (one H200, torch 2.11): raised
    from 2 s to 12 s, an all-reduce queued 4 s behind a kernel did not time out.

    Example (init may wait for a slow rank; training should not)::

        dist.init_process_group("nccl", timeout=timedelta(minutes=30))
        train_step(0)                               # first step: compile, warm-up, late data
        set_group_timeout(300)                      # from now on a hang is reported in 5 minutes
    """
    import torch.distributed.distributed_c10d as c10d

    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    setter = getattr(c10d, "_set_pg_timeout", None)
    if setter is None:
        raise RuntimeError("this torch has no distributed_c10d._set_pg_timeout; create a new group with "
                           "new_group(timeout=...) instead")
    setter(datetime.timedelta(seconds=timeout_s), group)
    got = group_timeout_s(group)
    if abs(got - timeout_s) > 1e-3:
        raise RuntimeError(f"set the group timeout to {timeout_s} s but the group reports {got} s")
    return got


def open_store(host: str, port: int, *, rank: int, world_size: int, timeout_s: float) -> Any:
    """A TCPStore on ``host:port`` hosted by rank 0 (the others connect to it, retrying for
    ``timeout_s``), for :func:`store_barrier` and then ``init_process_group(store=...)``."""
    import torch.distributed as dist

    return dist.TCPStore(host, port, world_size, rank == 0, timeout=datetime.timedelta(seconds=timeout_s),
                         wait_for_workers=False)


class StoreBarrierTimeout(TimeoutError):
    """Raised by :func:`store_barrier`; ``missing`` are the ranks that never arrived."""

    def __init__(self, key: str, missing: tuple[int, ...], timeout_s: float) -> None:
        self.missing = missing
        super().__init__(f"store barrier {key!r}: rank(s) {', '.join(map(str, missing))} did not arrive within "
                         f"{timeout_s:g} s")


def store_barrier(store: Any, *, rank: int, world_size: int, timeout_s: float,
                  key: str = "nccl_workbook/store_barrier", poll_s: float = 0.05) -> float:
    """Wait until every rank has reached this barrier on ``store``, for at most ``timeout_s``; returns
    the seconds waited. On a timeout raises :class:`StoreBarrierTimeout` naming the missing ranks
    (each rank sets its own key, so the store knows who came).

    Example (before init, so that a slow rank's preparation is waited for with its own timeout)::

        store = open_store(addr, port, rank=rank, world_size=ws, timeout_s=3600)
        prepare_shard()                      # slow on some ranks
        store_barrier(store, rank=rank, world_size=ws, timeout_s=3600)
        dist.init_process_group("nccl", store=store, rank=rank, world_size=ws, timeout=timedelta(minutes=5))

    Use a new ``key`` for each barrier on the same store.
    """
    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in [0, {world_size})")
    t0 = time.monotonic()
    store.set(f"{key}/{rank}", "1")
    keys = [f"{key}/{r}" for r in range(world_size)]
    while True:
        missing = tuple(r for r, k in enumerate(keys) if not store.check([k]))
        waited = time.monotonic() - t0
        if not missing:
            return waited
        if waited >= timeout_s:
            raise StoreBarrierTimeout(key, missing, timeout_s)
        time.sleep(poll_s)


def prepare_after_init(fn: Callable[..., T], *args: Any, timeout_s: float, group: Any = None, **kwargs: Any) -> T:
    """Call after ``init_process_group``: run ``fn`` (this rank's data preparation) on every rank,
    then meet at one barrier with its own timeout (``dist.barrier(timeout=timeout_s)``), so that the
    slowest rank's preparation is waited for and the group keeps its short timeout for training.
    Returns ``fn``'s result.

    Example::

        dist.init_process_group("nccl", timeout=timedelta(minutes=5))   # every rank arrives on time
        shard = prepare_after_init(prepare_shard, rank, timeout_s=3600)
    """
    import torch.distributed as dist

    if not timeout_s > 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    from nccl_workbook.fixes.timeouts import barrier_with_timeout

    result = fn(*args, **kwargs)
    barrier_with_timeout(timeout_s, group=group)
    return result
