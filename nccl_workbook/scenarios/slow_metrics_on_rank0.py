"""Scenario ``slow-metrics-on-rank0`` (seed 004: norms for the progress bar, and a log flush).

What happened: multi-GPU training died with ``WorkNCCL(SeqNum=18723, OpType=ALLREDUCE, NumelIn=1,
…) ran for 600017 milliseconds``. Rank 0 alone computed gradient and parameter norms for its
progress bar and wandb, one norm per parameter, stacked. The seed blames that computation and
replaces it with a loop that copies every gradient and parameter to the CPU and sums squares.

What is true, measured here: rank-0-only work in the step makes every other rank wait for it in
the next collective, every step; but a per-step cost of milliseconds cannot reach a
timeout of minutes (or of 3 s here). A timeout needs one wait longer than the timeout: a
synchronous push of the log (to the tracker, to shared storage) that hangs once.

Here, scaled to seconds: 10 DDP steps of a small residual MLP (8 blocks, 50 parameter tensors) on
4 ranks. Every step, every rank all-reduces its loss for the log (a 1-element all-reduce, like the
seed's ``NumelIn=1``) and DDP all-reduces the gradients. On rank 0 only, every step: the norms
(``norms``), then one synchronous logging call (progress bar and tracker, ``log_call_s`` = 20 ms,
paced); every ``flush_every`` steps a push of the log (``flush_s`` = 0.3 s, paced as a network
round trip); the second push hangs for ``slow_flush_s`` = 4.5 s, longer than the 3 s group timeout.

Variants:

``broken``
    stacked per-parameter norms and synchronous logging on rank 0: the others wait ~20 ms per
    step, 0.3 s after the first push, and time out in step 8's loss all-reduce during the second.
``seed-fix``
    all of the seed's advice that applies: its CPU loop for the norms and its recommendation 5,
    offline logging (``WANDB_MODE=offline``: the push is a local file write). It works, because of
    the offline logging: with the CPU loop alone it still times out (the notebook measures both).
``fused-norm``
    the gradient norm that ``clip_grad_norm_`` already returns and ``get_total_norm`` for the
    parameters, on every rank (:func:`nccl_workbook.fixes.total_norms`), with offline logging.
``background-logging``
    fused norms, and the online log (pushes included, the hanging one too) written by
    :class:`nccl_workbook.fixes.BackgroundLogger` on a thread: the step never waits for it.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.metrics import BackgroundLogger, total_norms
from nccl_workbook.scenarios._common import make_ddp, paced
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Params", "program", "SCENARIO", "make_model", "stacked_norms", "cpu_loop_norms", "fused_norms",
    "NORM_METHODS", "compare_norm_methods", "TrackerClient", "wait_by_rank",
    "variant_summary",
]

NORMS = ("stacked", "cpu-loop", "fused")
LOGGERS = ("sync", "offline", "background")


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 10
    #: how the norms are computed: "stacked" and "cpu-loop" on rank 0 only, "fused" on every rank
    norms: str = "stacked"
    #: "sync" (online, on the training thread), "offline" (pushes are local writes) or "background"
    logger: str = "sync"
    #: one synchronous logging call per step on rank 0 (progress bar + tracker), paced
    log_call_s: float = 0.02
    #: steps between pushes of the log
    flush_every: int = 4
    #: one usual push to the tracker or shared storage (a network round trip, paced)
    flush_s: float = 0.3
    #: which push (1-based) hangs, and for how long (0: none hangs)
    slow_flush: int = 2
    slow_flush_s: float = 4.5
    max_grad_norm: float = 1.0
    dim: int = 64
    blocks: int = 8
    batch: int = 16

    def __post_init__(self) -> None:
        if self.norms not in NORMS:
            raise ValueError(f"norms must be one of {NORMS}, got {self.norms!r}")
        if self.logger not in LOGGERS:
            raise ValueError(f"logger must be one of {LOGGERS}, got {self.logger!r}")
        if self.flush_every < 1 or self.steps < 1 or min(self.log_call_s, self.flush_s, self.slow_flush_s) < 0:
            raise ValueError("need steps >= 1, flush_every >= 1 and non-negative durations")


# -- the model and the three ways to compute the norms -------------------------------------------
def make_model(dim: int = 64, blocks: int = 8, seed: int = 0) -> Any:
    """A small residual MLP: ``blocks`` x (LayerNorm, Linear dim->2dim, GELU, Linear 2dim->dim),
    then a Linear head: ``6 * blocks + 2`` parameter tensors (50, 137,792 parameters at the
    defaults)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.up = nn.Linear(dim, 2 * dim)
            self.down = nn.Linear(2 * dim, dim)

        def forward(self, x: Any) -> Any:
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(seed)
    return nn.Sequential(*[Block() for _ in range(blocks)], nn.Linear(dim, dim))


def stacked_norms(parameters: Iterable[Any]) -> tuple[float, float]:
    """The broken code: one norm per parameter (a kernel and a tensor each), stacked, then
    ``.item()`` (a device-to-host sync on a GPU)."""
    import torch

    params = list(parameters)
    grads = torch.stack([p.grad.detach().norm(2) for p in params if p.grad is not None]).norm(2)
    weights = torch.stack([p.detach().norm(2) for p in params]).norm(2)
    return grads.item(), weights.item()


def cpu_loop_norms(parameters: Iterable[Any]) -> tuple[float, float]:
    """Seed 004's fix, verbatim: every gradient and parameter copied to the CPU (on a GPU: a
    device-to-host copy of the whole model, twice, each a sync), squared, summed."""
    import torch

    grad_sq_sum = torch.tensor(0.0)
    param_sq_sum = torch.tensor(0.0)
    for p in parameters:
        if p.grad is not None:
            grad_sq_sum += (p.grad.detach().cpu() ** 2).sum()
        param_sq_sum += (p.detach().cpu() ** 2).sum()
    return torch.sqrt(grad_sq_sum).item(), torch.sqrt(param_sq_sum).item()


def fused_norms(parameters: Iterable[Any], grad_norm: Any = None) -> tuple[float, float]:
    """:func:`nccl_workbook.fixes.total_norms` (``clip_grad_norm_``'s value or ``get_total_norm``,
    fused ``_foreach_norm``), then the logger's ``.item()``."""
    g, p = total_norms(parameters, grad_norm=grad_norm)
    return float(g.item()), float(p.item())


NORM_METHODS: dict[str, Callable[[Iterable[Any]], tuple[float, float]]] = {
    "stacked": stacked_norms, "cpu-loop": cpu_loop_norms, "fused": fused_norms,
}


def compare_norm_methods(*, repeats: int = 200, dim: int = 64, blocks: int = 8, batch: int = 16) -> pd.DataFrame:
    """Measure the three norm methods on the scenario's model (after one real backward), in this
    process, on one thread, interleaved so that machine noise hits all three alike.

    Columns, per call: ``us_per_call`` (median µs on this CPU), ``kernels`` (ATen compute ops
    dispatched, views not counted: on a GPU each is a kernel launch), ``bytes_allocated`` (new
    tensor storage), ``gpu_host_copies`` (device-to-host copies a GPU would make: each ``.item()``
    and each ``.cpu()`` of a GPU tensor, a sync; from the code), and the two norms (they agree).
    """
    import pandas as pd
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = make_model(dim, blocks)
        x = torch.randn(batch, dim, generator=torch.Generator().manual_seed(0))
        (model(x) - x).pow(2).mean().backward()
        params = list(model.parameters())
        times: dict[str, list[float]] = {m: [] for m in NORM_METHODS}
        values: dict[str, tuple[float, float]] = {}
        counts: dict[str, tuple[int, int]] = {}
        for m, fn in NORM_METHODS.items():
            with _OpCounter() as c:
                values[m] = fn(params)
            counts[m] = (c.kernels, c.bytes)
        for _ in range(repeats):
            for m, fn in NORM_METHODS.items():
                t0 = time.perf_counter_ns()
                fn(params)
                times[m].append((time.perf_counter_ns() - t0) / 1e3)
    finally:
        torch.set_num_threads(threads)
    n_with_grad = sum(p.grad is not None for p in params)
    copies = {"stacked": 2, "cpu-loop": n_with_grad + len(params), "fused": 2}
    who = {"stacked": "rank 0 only", "cpu-loop": "rank 0 only", "fused": "every rank"}
    return pd.DataFrame(
        {
            "runs_on": [who[m] for m in NORM_METHODS],
            "us_per_call": [round(statistics.median(times[m]), 1) for m in NORM_METHODS],
            "kernels": [counts[m][0] for m in NORM_METHODS],
            "bytes_allocated": [counts[m][1] for m in NORM_METHODS],
            "gpu_host_copies": [copies[m] for m in NORM_METHODS],
            "grad_norm": [round(values[m][0], 5) for m in NORM_METHODS],
            "param_norm": [round(values[m][1], 4) for m in NORM_METHODS],
        },
        index=pd.Index(list(NORM_METHODS), name="method"),
    )


_VIEW_OPS = {"aten.detach.default", "aten.lift_fresh.default", "aten.alias.default", "aten.view.default",
             "aten._local_scalar_dense.default"}


class _OpCounter:
    """Counts the ATen compute ops a call dispatches (views and ``.item()`` reads excluded) and the
    bytes of the new tensor storage they allocate (a ``TorchDispatchMode``)."""

    def __enter__(self) -> _OpCounter:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        counter = self
        self.kernels = 0
        self.bytes = 0

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
                out = func(*args, **kwargs)
                if str(func) not in _VIEW_OPS:
                    counter.kernels += 1
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                        counter.bytes += t.untyped_storage().nbytes()
                return out

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)


# -- the experiment tracker ------------------------------------------------------------------------
class TrackerClient:
    """Stands for an experiment tracker (or a metrics file on shared storage).

    ``write`` formats a JSON line into the buffer; it takes ``call_s`` (paced), like a progress-bar
    refresh plus a tracker call. ``flush`` pushes the buffer: online, a network round trip of
    ``flush_s`` (paced), the ``slow_flush``-th of which hangs for ``slow_flush_s``; offline
    (``WANDB_MODE=offline`` in the seed), a real append to a local file.
    """

    def __init__(self, params: Params, *, offline: bool) -> None:
        self.params = params
        self.offline = offline
        self.buffer: list[str] = []
        self.flushes = 0
        self.flush_times_s: list[float] = []
        fd, self.path = tempfile.mkstemp(prefix="nccl-workbook-metrics-", suffix=".jsonl")
        os.close(fd)

    def write(self, record: dict[str, Any]) -> None:
        paced(self.params.log_call_s, lambda: self.buffer.append(json.dumps(record)))

    def flush(self) -> None:
        self.flushes += 1
        t0 = time.perf_counter()
        lines, self.buffer = self.buffer, []
        if self.offline:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        else:
            p = self.params
            slow = p.slow_flush_s > 0 and self.flushes == p.slow_flush
            paced(p.slow_flush_s if slow else p.flush_s, lambda: "\n".join(lines).encode())
        self.flush_times_s.append(time.perf_counter() - t0)

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


def wait_by_rank(result: Any) -> pd.DataFrame:
    """Per rank: the median and the largest time (ms) it spent inside collectives per training step,
    over the steps every rank completed. Ranks that wait for another rank have the larger median."""
    import pandas as pd

    tr = result.trace
    coll = tr[(tr["kind"] == "collective") & tr["step"].notna() & tr["t_end_ns"].notna()]
    done = tr[(tr["kind"] == "step") & (tr["status"] == "ok")].groupby("step")["rank"].nunique()
    steps = set(done[done == result.world_size].index)
    coll = coll[coll["step"].isin(steps)]
    per = ((coll["t_end_ns"] - coll["t_enqueue_ns"]).astype("float64") / 1e6).groupby([coll["rank"], coll["step"]]).sum()
    g = per.groupby(level="rank")
    return pd.DataFrame({"median_ms": g.median().round(1), "max_ms": g.max().round(1)}).rename_axis("rank")


def variant_summary(results: Iterable[Any]) -> pd.DataFrame:
    """One row per run: outcome, how long ranks 1..N-1 waited for rank 0 per step (median and
    longest, ms, over the steps every rank completed), how long rank 0's training thread spent
    logging, and its longest log push (s)."""
    import pandas as pd

    rows = {}
    for r in results:
        w = wait_by_rank(r)
        others = w.drop(index=0, errors="ignore")
        m0 = r.metrics.get(0, {})
        rows[r.variant] = {
            "outcome": r.outcome.value,
            "others_wait_median_ms": float(others["median_ms"].median()) if len(others) else float("nan"),
            "others_wait_longest_ms": float(others["max_ms"].max()) if len(others) else float("nan"),
            "rank0_wait_median_ms": float(w.loc[0, "median_ms"]) if 0 in w.index else float("nan"),
            "rank0_logging_on_training_thread_s": m0.get("log_s_on_training_thread"),
            "longest_push_s": m0.get("longest_flush_s"),
            "wall_s": round(r.wall_s, 2),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("variant")


# -- the rank program -------------------------------------------------------------------------------
def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training loop of the incident, one rank of it."""
    import torch
    import torch.distributed as dist

    ddp = make_ddp(ctx, make_model(params.dim, params.blocks))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    model_params = list(ddp.parameters())
    logs = ctx.is_main
    tracker = TrackerClient(params, offline=params.logger == "offline") if logs else None
    background = (BackgroundLogger(tracker.write, flush=tracker.flush, flush_every=params.flush_every)
                  if tracker is not None and params.logger == "background" else None)
    g = torch.Generator().manual_seed(1000 + ctx.rank)
    metrics_s = log_s = 0.0
    try:
        for i in range(params.steps):
            with ctx.tracer.step(i):
                x = torch.randn(params.batch, params.dim, generator=g).to(ctx.device)
                loss = (ddp(x) - x).pow(2).mean()
                # the mean loss over ranks for the log: a 1-element ALLREDUCE, the first collective
                # of the step, where ranks 1..N-1 wait for rank 0 (the seed's NumelIn=1)
                loss_avg = loss.detach().clone()
                dist.all_reduce(loss_avg)
                loss_avg /= ctx.world_size
                opt.zero_grad(set_to_none=True)
                loss.backward()  # DDP's gradient ALLREDUCE (one bucket)
                t0 = time.perf_counter()
                if params.norms == "fused":  # every rank: the value clipping computes anyway
                    grad_norm = torch.nn.utils.clip_grad_norm_(model_params, params.max_grad_norm)
                    gn, pn = total_norms(model_params, grad_norm=grad_norm)
                    norms = (float(gn.item()), float(pn.item())) if logs else None
                else:
                    norms = None
                    if logs:
                        with ctx.tracer.region("metrics"):
                            norms = NORM_METHODS[params.norms](model_params)
                    torch.nn.utils.clip_grad_norm_(model_params, params.max_grad_norm)
                metrics_s += time.perf_counter() - t0
                opt.step()
                if tracker is None or norms is None:
                    continue
                record = {"step": i, "loss": round(float(loss_avg.item()), 5), "grad_norm": norms[0], "param_norm": norms[1]}
                t1 = time.perf_counter()
                if background is not None:
                    background.log(record)
                else:
                    with ctx.tracer.region("log"):
                        tracker.write(record)
                    if (i + 1) % params.flush_every == 0:
                        with ctx.tracer.region("log_flush"):
                            tracker.flush()
                log_s += time.perf_counter() - t1
    finally:
        if background is not None:
            background.close()  # after the last collective: waits for the pending pushes
        if tracker is not None:
            tracker.close()
    out: dict[str, Any] = {"steps": params.steps, "metrics_s": round(metrics_s, 4)}
    if tracker is not None:
        out.update(log_s_on_training_thread=round(log_s, 4), flushes=tracker.flushes,
                   longest_flush_s=round(max(tracker.flush_times_s, default=0.0), 3))
    if background is not None:
        out.update(background_busy_s=round(background.busy_s, 3), dropped=background.dropped)
    return out


SCENARIO = Scenario(
    id="slow-metrics-on-rank0",
    title="Rank 0 computes metrics and flushes logs while the others wait in the all-reduce",
    symptom="ALLREDUCE timeout on every rank but 0 in the middle of training; rank 0 was in its logging",
    seed="004",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 0: stacked per-parameter norms and synchronous logging; its second log push "
                "hangs 4.5 s", expect_ok=False),
        Variant("seed-fix", "the seed's CPU loop for the norms and its offline logging (pushes are local writes)",
                params={"norms": "cpu-loop", "logger": "offline"}),
        Variant("fused-norm", "clip_grad_norm_'s value + get_total_norm on every rank, offline logging",
                params={"norms": "fused", "logger": "offline"}),
        Variant("background-logging", "fused norms; the online log, pushes included, written on a background thread",
                params={"norms": "fused", "logger": "background"}),
    ),
    expected_culprits=lambda p, ws: (0,),
    expected_op="ALLREDUCE",
    notebook="02_slow_metrics_on_rank0.ipynb",
    deadline_s=lambda p, t: p.steps * (p.log_call_s + 0.5) + p.slow_flush_s + 4 * t + 30,
)
