"""Rank programs for tests/dist/test_failure_scenarios.py (module-level: pickled by reference)."""

from __future__ import annotations

from typing import Any


def count_children(ctx: Any, params: None) -> dict[str, Any]:
    """How many child processes this engine has (its ipyparallel nanny, plus any data-loader
    worker left behind)."""
    import psutil

    kids = [p for p in psutil.Process().children(recursive=True) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    return {"children": len(kids)}



def abort_while_blocked(ctx: Any, params: None) -> dict[str, Any]:
    """Ranks 0..N-2 block in an all-reduce that the last rank never joins (it sleeps past the
    timeout with its group open); 0.3 s in, a thread on rank 0 calls every abort torch 2.13 offers
    (``pg.abort()``, ``pg.shutdown()``, ``_abort_process_group()``). Returns how long rank 0's
    all-reduce took to end: about the group timeout when none of them frees a gloo collective."""
    import threading
    import time

    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if ctx.rank == ctx.world_size - 1:
        time.sleep(ctx.pg_timeout_s + 1.0)
        return {}
    called: list[str] = []
    if ctx.rank == 0:
        pg = dist.group.WORLD

        def abort_all() -> None:
            time.sleep(0.3)
            for name, fn in (("abort", pg.abort), ("shutdown", pg.shutdown), ("_abort_process_group", c10d._abort_process_group)):
                fn()
                called.append(name)

        thread = threading.Thread(target=abort_all, daemon=True)
        thread.start()
    t0 = time.perf_counter()
    try:
        dist.all_reduce(torch.ones(4))
        raised = False
    except Exception:  # noqa: BLE001 - the timeout, as expected
        raised = True
    took = time.perf_counter() - t0
    if ctx.rank == 0:
        thread.join()
    return {"all_reduce_s": round(took, 3), "raised": raised, "called": ",".join(called)}
