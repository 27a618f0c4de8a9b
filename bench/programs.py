"""Rank programs for the benchmarks (module-level: the engines import them by reference)."""

from __future__ import annotations

import statistics
import time
from typing import Any


def noop(ctx: Any, params: None) -> dict[str, Any]:
    return {}


def ddp_steps(ctx: Any, params: tuple[int, bool]) -> dict[str, Any]:
    """``n`` DDP steps of a 3-layer MLP; with ``hook`` the gradient all-reduce goes through the
    tracer's comm hook (the traced path), else through DDP's C++ default. Step time in ms."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from nccl_workbook.scenarios._common import make_mlp

    n, hook = params
    model = DDP(make_mlp(256, 512))
    if hook:
        ctx.tracer.trace_ddp(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    times = []
    for i in range(n):
        with ctx.tracer.step(i):
            t0 = time.perf_counter()
            loss = (model(x) - x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    colls = sum(1 for r in ctx.tracer.rows if r.kind == "collective")
    return {"step_ms": statistics.median(times[5:]) * 1e3, "colls_per_step": colls / n}
