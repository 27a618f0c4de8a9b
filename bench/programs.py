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


def ddp_paired(ctx: Any, n: int) -> dict[str, Any]:
    """Two copies of the same DDP model in one run, stepped alternately: one with DDP's built-in
    C++ all-reduce (untraced), one whose gradient all-reduce goes through the tracer's comm hook
    (traced). Alternating steps inside one run cancels the load drifts between runs that make
    run-to-run comparisons on a shared 2-core machine swing by ±15 %. Median step time of each, ms."""
    import copy

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from nccl_workbook.scenarios._common import make_mlp

    base = make_mlp(256, 512)
    plain, traced = DDP(copy.deepcopy(base)), DDP(copy.deepcopy(base))
    ctx.tracer.trace_ddp(traced)
    opts = {id(m): torch.optim.SGD(m.parameters(), lr=0.01) for m in (plain, traced)}
    x = torch.randn(64, 256)
    times: dict[int, list[float]] = {id(plain): [], id(traced): []}
    for i in range(2 * n):
        m = plain if i % 2 == 0 else traced
        with ctx.tracer.step(i):
            t0 = time.perf_counter()
            loss = (m(x) - x).pow(2).mean()
            opts[id(m)].zero_grad(set_to_none=True)
            loss.backward()
            opts[id(m)].step()
            times[id(m)].append(time.perf_counter() - t0)
    return {"plain_ms": statistics.median(times[id(plain)][5:]) * 1e3,
            "traced_ms": statistics.median(times[id(traced)][5:]) * 1e3}
