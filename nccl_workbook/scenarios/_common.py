"""Small real models and a DDP training step shared by the scenarios (CPU-sized, seconds not hours).

Everything here runs on the engines. Models are deliberately small (a few MLP layers) so that a
4-rank run on 2 CPU cores takes a fraction of a second per step; what a scenario needs to be slow
(the "sample generation", a log flush) is paced explicitly with :func:`paced`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from nccl_workbook.status import short_error

__all__ = ["make_mlp", "make_ddp", "train_steps", "paced", "rank_stop_frame", "stay_like_nccl"]


def make_mlp(dim: int = 64, hidden: int = 128, depth: int = 3, seed: int = 0) -> Any:
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    d = dim
    for _ in range(depth - 1):
        layers += [nn.Linear(d, hidden), nn.GELU()]
        d = hidden
    layers.append(nn.Linear(d, dim))
    return nn.Sequential(*layers)


def make_ddp(ctx: Any, model: Any, **ddp_kwargs: Any) -> Any:
    """Wrap ``model`` in DDP on the rank's device and route its gradient all-reduce through the
    tracer (so the trace shows one ALLREDUCE row per gradient bucket)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = model.to(ctx.device)
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    ddp = DDP(model, device_ids=device_ids, **ddp_kwargs)
    ctx.tracer.trace_ddp(ddp)
    return ddp


def train_steps(ctx: Any, ddp: Any, opt: Any, n_steps: int, *, first_step: int = 0, batch: int = 32,
                before_step: Callable[[int], None] | None = None) -> int:
    """``n_steps`` DDP steps on random data, each traced as a step. Returns the next step index."""
    import torch

    dim = next(ddp.parameters()).shape[1]
    g = torch.Generator().manual_seed(1000 * ctx.rank + first_step)
    for i in range(first_step, first_step + n_steps):
        with ctx.tracer.step(i):
            if before_step is not None:
                before_step(i)
            x = torch.randn(batch, dim, generator=g).to(ctx.device)
            loss = (ddp(x) - x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's gradient ALLREDUCE happens in here
            opt.step()
    return first_step + n_steps


def paced(seconds: float, work: Callable[[], Any]) -> Any:
    """Run ``work`` (real compute), then sleep until ``seconds`` have passed since the call.

    On a GPU the scenarios' slow parts (sampling, a log flush) take wall time while the CPU is
    mostly idle; pacing reproduces that duration on a shared 2-core machine without letting four
    busy ranks slow each other down, so the run's timing is the scenario's, not the machine's.
    """
    t0 = time.perf_counter()
    out = work()
    left = seconds - (time.perf_counter() - t0)
    if left > 0:
        time.sleep(left)
    return out


def stay_like_nccl(pg_timeout_s: float, failed_at_ns: int, *, margin_s: float = 1.5) -> float:
    """On a rank that just failed on its own (it raised, its data loader timed out), stay with the
    process group open until the peers' timeout, counted from ``failed_at_ns`` (``time.time_ns``),
    has run out, plus ``margin_s``. Returns the seconds it stayed.

    This reproduces what NCCL peers see: a failed rank's departure is not signalled to them, so
    they wait in their collective until the timeout. Under gloo, a rank that leaves (destroys its
    group, exits) makes its peers fail at once with ``Connection closed by peer``. The stay
    stands for a process stuck in its error handling (joining a data-loader worker, a non-daemon
    thread): with NCCL the peers time out whether it stays or not.
    """
    left = (failed_at_ns + int((pg_timeout_s + margin_s) * 1e9) - time.time_ns()) / 1e9
    if left > 0:
        time.sleep(left)
    return max(left, 0.0)


def rank_stop_frame(result: Any, t0_ns: int | None, *, cause_column: str,
                    names_cause: Callable[[int, str], bool]) -> Any:
    """Per rank: how its run ended (``stopped`` when a guard stopped it on purpose), when it
    stopped (the end of its last failed step) in seconds after ``t0_ns``, what it reported, and
    ``cause_column``: whether that report names the real cause (``names_cause(rank, text)``).
    Shared by the scenarios whose question is "how long until every rank knew, and what did it say"."""
    import pandas as pd

    tr = result.trace
    cols = ["status", "stopped_after_s", "reported", cause_column]
    if tr is None or len(tr) == 0:
        return pd.DataFrame(columns=cols).rename_axis("rank")
    rows = {}
    for out in result.per_rank:
        steps = tr[(tr["rank"] == out.rank) & (tr["kind"] == "step")]
        bad = steps[steps["status"] != "ok"]
        t_stop = int(bad["t_end_ns"].iloc[-1]) if len(bad) and pd.notna(bad["t_end_ns"].iloc[-1]) else None
        m = result.metrics.get(out.rank, {})
        text = out.error or str(m.get("stop_reason") or "")
        rows[out.rank] = {
            "status": "stopped" if m.get("stopped_early") else out.status.value,
            "stopped_after_s": None if t_stop is None or t0_ns is None else round((t_stop - t0_ns) / 1e9, 3),
            "reported": short_error(text, 120),
            cause_column: bool(names_cause(out.rank, text)),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols).rename_axis("rank")
