"""Rank programs used by the dist tests (module-level: pickled by reference to the engines)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def hang_outside_collective(ctx: Any, params: int) -> dict[str, Any]:
    """Rank ``params`` sleeps far past any deadline outside a collective (SIGINT can't help)."""
    import torch.distributed as dist

    if ctx.rank == params:
        time.sleep(3600)
    dist.barrier()
    return {}


def die_on_rank(ctx: Any, params: int) -> dict[str, Any]:
    """Rank ``params`` kills its own process inside the run."""
    import torch.distributed as dist

    dist.barrier()
    if ctx.rank == params:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return {}


def use_fixes_like_a_user(ctx: Any, params: float) -> dict[str, Any]:
    """A user's script using the importable fixes: side-group wait and sharded work."""
    import torch.distributed as dist

    from nccl_workbook.fixes import new_side_group, sharded, wait_for_main

    side = new_side_group(timeout_s=30)
    main_result = wait_for_main(lambda: (time.sleep(params), "done")[1], group=side)
    squares = sharded(lambda i: i * i, 10)
    dist.barrier()
    return {"main_result": str(main_result), "squares_ok": squares == [i * i for i in range(10)], "rank": dist.get_rank()}


def take_the_next_port_pick(port: int) -> None:
    """Run on an engine: its next rendezvous port pick returns ``port`` (held by someone else), as
    when another socket takes the picked port before rank 0's store listens on it."""
    from nccl_workbook import launchers

    real = launchers.free_port

    def once(addr: str, **kw: Any) -> int:
        launchers.free_port = real
        return port

    launchers.free_port = once
