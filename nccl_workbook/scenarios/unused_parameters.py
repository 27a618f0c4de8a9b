"""Scenario ``unused-parameters`` (seed 001: DDP and parameters that get no gradient on one rank).

What happened: seed 001's job died with collective timeouts, and one of its changes was
``DistributedDataParallel(..., find_unused_parameters=True)`` "for unused gradient handling". That
setting is the fix for one specific hang: a data-dependent branch that leaves some parameters out
of the loss on some ranks. DDP launches a gradient bucket's ALLREDUCE only when every parameter in
it has its gradient; on the rank that skipped the branch the bucket never becomes ready, so that
rank launches nothing, returns from ``backward()`` and raises at its next forward, while the other
ranks wait in the ALLREDUCE they launched.

Measured on torch 2.13 (gloo, CPU), 4 ranks, the auxiliary head skipped on rank 2 in step 2:

- rank 2 raises at the forward of step 3, within milliseconds: ``RuntimeError: Expected to have
  finished reduction in the prior iteration before starting a new one. This error indicates that
  your module has parameters that were not used in producing loss. …`` and ``Parameter indices
  which did not receive grad for rank 2: …``;
- ranks 0, 1 and 3 wait in the ALLREDUCE of step 2 until the group timeout.

Under NCCL nobody tells the waiting ranks that rank 2 failed: they time out. Under gloo, rank 2
leaving its group would make them fail at once, so the rank program keeps rank 2's group open until
its peers have timed out (:func:`~nccl_workbook.scenarios._common.stay_like_nccl`), as a process
stuck in its error handling does.

The model: a small multi-task network (linear embedding, one self-attention layer, an MLP block,
a main head) with an auxiliary head that runs only on samples that carry an auxiliary label. Each
rank's batches are seeded; on ``skip_ranks`` in step ``skip_step`` no sample has the label.

Variants:

``broken``
    plain DDP: rank 2 skips the auxiliary head in step 2; the others time out in ALLREDUCE.
``find-unused``
    ``find_unused_parameters=True``: works; costs one extra ALLREDUCE per step (counted from
    torch's flight recorder, metric ``allreduces_per_step``) and a graph walk.
``use-all-parameters``
    :func:`nccl_workbook.fixes.use_all_parameters`: every parameter enters the loss with weight 0,
    so every rank produces every gradient. Trains exactly the same weights as ``find-unused``
    (metric ``param_checksum``).

``ddp="static_graph"`` is not a variant: with a data-dependent branch it fails like ``broken``;
with ``skip_every_step=True`` (a rank-dependent but fixed set of unused parameters) it works. The
notebook runs both.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.ddp import use_all_parameters
from nccl_workbook.scenarios._common import make_ddp, stay_like_nccl
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "make_multitask_net", "skipping_ranks", "batch_for", "unused_parameter_lines",
           "DebugLevelCheck", "ddp_debug_check", "cost_frame"]

DDP_MODES = ("plain", "find_unused", "static_graph")


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 6
    #: ranks whose batch in ``skip_step`` has no sample with an auxiliary label (clamped to the world)
    skip_ranks: tuple[int, ...] = (2,)
    #: the step (0-based) in which those ranks skip the auxiliary head
    skip_step: int = 2
    #: skip it in every step instead (a rank-dependent but fixed set of unused parameters)
    skip_every_step: bool = False
    #: "plain", "find_unused" (find_unused_parameters=True) or "static_graph" (static_graph=True)
    ddp: str = "plain"
    #: add nccl_workbook.fixes.use_all_parameters to every step's loss
    use_all: bool = False
    batch: int = 16
    tokens: int = 8
    dim: int = 32
    hidden: int = 64
    #: fraction of samples that carry an auxiliary label (on ranks and steps that are not skipped)
    aux_fraction: float = 0.25

    def __post_init__(self) -> None:
        if self.ddp not in DDP_MODES:
            raise ValueError(f"ddp must be one of {DDP_MODES}, got {self.ddp!r}")
        if not 0 <= self.skip_step <= self.steps - 2:
            raise ValueError(f"need 0 <= skip_step <= steps - 2 (the skipping rank fails at the next forward), "
                             f"got skip_step={self.skip_step}, steps={self.steps}")
        if not 0 < self.aux_fraction <= 1:
            raise ValueError(f"aux_fraction must be in (0, 1], got {self.aux_fraction}")
        if self.hidden % 4:
            raise ValueError(f"hidden must be a multiple of 4 (attention heads), got {self.hidden}")


def skipping_ranks(params: Params, world_size: int) -> tuple[int, ...]:
    """The ranks that skip the auxiliary head (``skip_ranks`` clamped to the world size)."""
    return tuple(sorted({min(r, world_size - 1) for r in params.skip_ranks}))


@functools.cache
def _model_class() -> type:
    """The model class, defined on first use (this module is imported without torch)."""
    import torch
    from torch import nn

    class _MultiTaskNet(nn.Module):
        """Embedding, one self-attention layer, an MLP block, a main head; an auxiliary head that
        runs only on the samples that carry an auxiliary label (the data-dependent branch)."""

        def __init__(self, dim: int, hidden: int) -> None:
            super().__init__()
            self.embed = nn.Linear(dim, hidden)
            self.attn = nn.MultiheadAttention(hidden, num_heads=4, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
            self.head = nn.Linear(hidden, dim)
            self.aux_head = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.GELU(), nn.Linear(hidden // 2, 1))

        def forward(self, x: torch.Tensor, has_aux: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            h = self.embed(x)
            h = h + self.attn(h, h, h, need_weights=False)[0]
            h = h + self.mlp(h)
            main = self.head(h)
            aux = self.aux_head(h[has_aux].mean(dim=1)).squeeze(-1) if bool(has_aux.any()) else None
            return main, aux

    return _MultiTaskNet


def make_multitask_net(dim: int = 32, hidden: int = 64, seed: int = 0) -> Any:
    """The scenario's model (see ``_model_class``), with seeded weights: identical on every rank."""
    import torch

    torch.manual_seed(seed)
    return _model_class()(dim, hidden)


def batch_for(params: Params, rank: int, step: int, world_size: int) -> tuple[Any, Any, Any]:
    """(inputs ``[batch, tokens, dim]``, auxiliary-label mask ``[batch]``, auxiliary targets) of one
    rank in one step. On a skipping rank in the skipped step(s) the mask is all False; elsewhere at
    least one sample carries the label."""
    import torch

    g = torch.Generator().manual_seed(10_000 * rank + step)
    x = torch.randn(params.batch, params.tokens, params.dim, generator=g)
    has_aux = torch.rand(params.batch, generator=g) < params.aux_fraction
    has_aux[0] = True
    skipped = rank in skipping_ranks(params, world_size) and (params.skip_every_step or step == params.skip_step)
    if skipped:
        has_aux[:] = False
    target = torch.randn(params.batch, generator=g)
    return x, has_aux, target


def _fr_allreduces(backend: str = "gloo") -> list[int]:
    """Record ids of the all-reduces in torch's flight recorder (this process), or [] if off."""
    import torch

    c10d = torch._C._distributed_c10d
    try:  # NCCL keeps its own recorder; gloo's is _dump_fr_trace_json (on an NCCL rank it is empty)
        dump = json.loads((c10d._dump_nccl_trace_json if backend == "nccl" else c10d._dump_fr_trace_json)())
    except Exception:  # noqa: BLE001 - a build without the flight recorder: no count
        return []
    return [int(e.get("record_id", -1)) for e in dump.get("entries", []) if "all_reduce" in str(e.get("profiling_name", ""))]


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """One rank: DDP training of the multi-task model; some ranks skip the auxiliary head."""
    import torch

    kwargs: dict[str, Any] = {}
    if params.ddp == "find_unused":
        kwargs["find_unused_parameters"] = True
    elif params.ddp == "static_graph":
        kwargs["static_graph"] = True
    state: dict[str, Any] = {"failed_at_ns": None, "skipped_steps": 0}
    before = set(_fr_allreduces(ctx.backend))

    def train() -> float:
        # the DDP model lives in this frame only, so that it is released when a failure leaves it
        ddp = make_ddp(ctx, make_multitask_net(params.dim, params.hidden), **kwargs)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        for i in range(params.steps):
            x, has_aux, target = (t.to(ctx.device) for t in batch_for(params, ctx.rank, i, ctx.world_size))
            with ctx.tracer.step(i):
                t = time.time_ns()
                try:
                    main, aux = ddp(x, has_aux)
                except RuntimeError:
                    state["failed_at_ns"] = t  # DDP noticed the unfinished reduction of the last step
                    raise
                loss = (main - x).pow(2).mean()
                if aux is not None:
                    loss = loss + (aux - target[has_aux]).pow(2).mean()
                else:
                    state["skipped_steps"] += 1
                if params.use_all:
                    loss = use_all_parameters(loss, ddp.module)
                opt.zero_grad(set_to_none=True)
                loss.backward()  # DDP's gradient ALLREDUCE: where the other ranks wait
                opt.step()
        with torch.no_grad():
            return float(sum(p.double().abs().sum() for p in ddp.module.parameters()))

    try:
        checksum = train()
    except BaseException:
        if state["failed_at_ns"] is not None:
            stay_like_nccl(ctx.pg_timeout_s, state["failed_at_ns"])
        raise
    allreduces = len(set(_fr_allreduces(ctx.backend)) - before)
    return {
        "steps": params.steps,
        "skipped_aux_steps": state["skipped_steps"],
        "allreduces_per_step": round(allreduces / params.steps, 2) if allreduces else None,
        "param_checksum": round(checksum, 6),
    }


def unused_parameter_lines(text: str | None) -> list[str]:
    """The lines of a DDP error (or a rank's traceback) that name the parameters that got no
    gradient: ``Parameters which did not receive grad for rank N: …`` (with
    ``TORCH_DISTRIBUTED_DEBUG=INFO`` or ``DETAIL``) and ``Parameter indices which did not receive
    grad for rank N: …`` (always)."""
    return [line.strip() for line in (text or "").splitlines()
            if line.strip().startswith("Parameter") and "did not receive grad for rank" in line]


@dataclass(frozen=True)
class DebugLevelCheck:
    """What DDP did in a fresh process with ``TORCH_DISTRIBUTED_DEBUG=debug_level``, set before the
    process group was created (``when="before-init"``, as a job's environment does) or switched on
    after it (``"after-init"``): whether the model could be constructed, and the lines of DDP's
    error that name the parameters a skipped branch left without gradient."""

    debug_level: str
    when: str
    returncode: int
    ddp_constructed: bool
    #: the signal that killed the process (``SIGSEGV``…), None if it exited
    signal: str | None
    unused_lines: tuple[str, ...] = ()
    #: the end of the process's stderr (Python's fault handler prints the crashing frames there)
    stderr_tail: str = field(default="", repr=False)

    @property
    def crashed(self) -> bool:
        return self.signal is not None


_DDP_CHECK = """
import faulthandler, os, sys, torch, torch.distributed as dist
from nccl_workbook.scenarios.unused_parameters import make_multitask_net
faulthandler.enable()
level, when = sys.argv[1], sys.argv[2]
if when == "before-init":
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = level
    dist.set_debug_level_from_env()
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
if when == "after-init":
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = level
    dist.set_debug_level_from_env()
ddp = torch.nn.parallel.DistributedDataParallel(make_multitask_net(8, 16))
print("DDP constructed", flush=True)
try:
    for step in range(3):  # the auxiliary head is skipped in step 1: DDP raises at step 2
        has_aux = torch.full((2,), step != 1)
        main, aux = ddp(torch.randn(2, 3, 8), has_aux)
        (main.sum() + (aux.sum() if aux is not None else 0)).backward()
except RuntimeError as e:
    print(e, flush=True)
dist.destroy_process_group()
"""


def ddp_debug_check(debug_level: str, *, when: str = "before-init", timeout_s: float = 120.0) -> DebugLevelCheck:
    """Run DDP with a branch skipped in one step, on a 1-rank gloo group, in a fresh Python process
    with ``TORCH_DISTRIBUTED_DEBUG=debug_level`` (see :class:`DebugLevelCheck`), and report what
    happened. A separate process, because on torch 2.13 with gloo ``DETAIL`` set before the group is
    created kills it (measured: SIGSEGV while constructing DDP, in its construction-time logging,
    ``c10d::Logger::set_env_variables``, when the group is wrapped for ``DETAIL``'s collective
    checks); an engine would die the same way."""
    if debug_level not in {"OFF", "INFO", "DETAIL"}:
        raise ValueError(f"debug_level must be OFF, INFO or DETAIL, got {debug_level!r}")
    if when not in {"before-init", "after-init"}:
        raise ValueError(f"when must be 'before-init' or 'after-init', got {when!r}")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DISTRIBUTED_DEBUG"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([sys.executable, "-c", _DDP_CHECK, debug_level, when], env=env, capture_output=True,
                          text=True, timeout=timeout_s)
    sig = signal.Signals(-proc.returncode).name if proc.returncode < 0 else None
    return DebugLevelCheck(debug_level, when, proc.returncode, "DDP constructed" in proc.stdout, sig,
                           tuple(unused_parameter_lines(proc.stdout)), proc.stderr[-800:])


def cost_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per run: outcome, median step time (ms, median over ranks of each rank's median),
    all-reduces per step as torch issued them (flight recorder), and the checksum of the trained
    weights on rank 0 (equal checksums: the same training)."""
    import statistics

    import pandas as pd

    rows = []
    for r in results:
        medians = [p.step_time_median_s for p in r.per_rank if p.step_time_median_s is not None]
        m0 = r.metrics.get(0, {})
        rows.append({
            "run": r.variant, "outcome": r.outcome.value,
            "step_median_ms": round(statistics.median(medians) * 1e3, 2) if medians else None,
            "allreduces_per_step": m0.get("allreduces_per_step"), "param_checksum": m0.get("param_checksum"),
        })
    return pd.DataFrame(rows).set_index("run")


SCENARIO = Scenario(
    id="unused-parameters",
    title="A data-dependent branch leaves parameters without gradients on one rank under DDP",
    symptom="ALLREDUCE timeout in backward on every rank but one; that rank raised 'Expected to have "
            "finished reduction in the prior iteration' at its next forward",
    seed="001",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "plain DDP; rank 2's batch in step 2 has no auxiliary label, so its auxiliary head is skipped",
                expect_ok=False),
        Variant("find-unused", "DistributedDataParallel(find_unused_parameters=True)",
                params={"ddp": "find_unused"}),
        Variant("use-all-parameters", "every parameter enters the loss with weight 0 (fixes.use_all_parameters)",
                params={"use_all": True}),
    ),
    expected_culprits=lambda p, ws: skipping_ranks(p, ws),
    expected_op="ALLREDUCE",
    notebook="07_unused_parameters.ipynb",
)
