"""Scenario ``collective-mismatch`` (desync): one rank calls a different collective, or the same
collective with a different shape, at the same sequence number as the others.

What happens in real jobs: a value that must be the same on every rank is computed from local
data. The classic is a logging histogram, ``torch.bincount(labels)`` without ``minlength``: its
length is the largest label in *this rank's* batch plus one, so the day one rank's batch holds a
rare class, that rank all-reduces 10 counts while the others all-reduce 9. The same happens when a
local condition picks the collective (``if saw_rare: all_gather(...) else: all_reduce(...)``).
Under NCCL the ranks then wait for each other until the watchdog fires (``WorkNCCL(SeqNum=…,
OpType=ALLREDUCE, NumelIn=9, …) ran for 600000 milliseconds``); nothing in the log says which rank
called what.

Here: 4 DDP training steps of a small MLP classifier (10 classes, batches of 64); after each step
every rank all-reduces its class counts for the log. At step 2 rank 3's batch holds one sample of
the rare class 9.

What gloo does with the mismatch (measured, torch 2.13, 4 ranks): with a few elements per rank
(9 vs 10 counts) the receiving side of the ring finds a message larger than it expects and the
process aborts (``gloo::EnforceNotMet … op.preamble.length <= op.nbytes … Received data size
doesn't match expected size``, SIGABRT); the others fail at once with ``Connection reset/closed by
peer``. With 2 vs 3 elements the same call instead hangs until the timeout, or completes with wrong
sums; a different op (all_gather vs all_reduce) hangs until the timeout. The workbook's cluster
sees the dead engine, reports the rank ``crashed`` and starts a replacement before the next run.

Variants (the ``kind`` knob picks the desync: ``shape`` or ``op``):

``broken``
    the rank-dependent shape (or branch); the run fails, rank 3 is the culprit.
``static-shape``
    rank-independent control flow: ``bincount(labels, minlength=n_classes)`` and no branch around
    the collective (the rare class is just one more bin).
``agree-first``
    the local fact is made collective first: :func:`~nccl_workbook.fixes.max_across_ranks` +
    :func:`~nccl_workbook.fixes.pad_to` for the length, :func:`~nccl_workbook.fixes.any_rank` for
    the branch, so every rank does the same thing.

Two detectors are knobs of every variant, not fixes: ``detail=True`` runs the metrics collective on
a group checked like ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` (:func:`~nccl_workbook.fixes.detail_group`);
``guard=True`` calls :func:`~nccl_workbook.fixes.check_same` right before it. Either turns the
broken run into an immediate error on every rank that names rank 3.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes._device import collective_device
from nccl_workbook.fixes.desync import any_rank, check_same, detail_group, pad_to
from nccl_workbook.fixes.uneven import max_across_ranks
from nccl_workbook.scenarios._common import make_ddp, make_mlp
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "make_batch", "log_class_counts", "dtype_program", "dtype_summary"]

_KINDS = {"shape", "op"}
_MODES = {"broken", "static", "agree"}


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 4
    #: the step at which ``odd_rank``'s batch holds the rare class
    mismatch_step: int = 2
    #: the rank whose batch holds the rare class (the last rank when the run has fewer ranks)
    odd_rank: int = 3
    n_classes: int = 10
    batch: int = 64
    dim: int = 32
    #: ``shape`` (bincount without minlength) or ``op`` (a local branch picks all_gather vs all_reduce)
    kind: str = "shape"
    #: ``broken``, ``static`` (rank-independent control flow) or ``agree`` (agree first)
    mode: str = "broken"
    #: detector: ``check_same`` on the shape / branch right before the metrics collective
    guard: bool = False
    #: detector: run the metrics collective on a DETAIL-checked group
    detail: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {self.kind!r}")
        if self.mode not in _MODES:
            raise ValueError(f"mode must be one of {sorted(_MODES)}, got {self.mode!r}")
        if self.n_classes < 3:
            raise ValueError(f"need n_classes >= 3 (common classes plus one rare one), got {self.n_classes}")
        if self.batch < self.n_classes:
            raise ValueError(f"batch ({self.batch}) must hold one sample of every class ({self.n_classes})")
        if self.odd_rank < 0:
            raise ValueError(f"odd_rank must be >= 0, got {self.odd_rank}")
        if not 0 <= self.mismatch_step < self.steps:
            raise ValueError(f"mismatch_step must be in [0, steps), got {self.mismatch_step} with steps={self.steps}")

    @property
    def rare_class(self) -> int:
        return self.n_classes - 1


def make_batch(rank: int, step: int, params: Params) -> tuple[Any, Any]:
    """A batch of (features, labels). Every batch holds each common class (0..n_classes-2) at least
    once; only ``odd_rank``'s batch at ``mismatch_step`` holds one sample of the rare class."""
    import torch

    g = torch.Generator().manual_seed(7919 * rank + step)
    common = params.n_classes - 1
    labels = torch.randint(0, common, (params.batch,), generator=g)
    labels[:common] = torch.arange(common)
    if rank == params.odd_rank and step == params.mismatch_step:
        labels[-1] = params.rare_class
    x = torch.randn(params.batch, params.dim, generator=g)
    x[:, : params.n_classes] += 2.0 * torch.nn.functional.one_hot(labels, params.n_classes)
    return x, labels


def log_class_counts(labels: Any, params: Params, group: Any = None) -> Any:
    """The logging collective of every step: the global class histogram (summed over ranks).

    ``mode`` and ``kind`` decide how it is done; see the module docstring. Returns the counts this
    rank ends up with (the global histogram when every rank did the same thing).
    """
    import torch
    import torch.distributed as dist

    labels = labels.to(collective_device(group))  # NCCL takes no CPU tensors
    if params.kind == "shape":
        if params.mode == "static":
            counts = torch.bincount(labels, minlength=params.n_classes)
        else:
            counts = torch.bincount(labels)  # length: largest label in THIS batch + 1
            if params.mode == "agree":
                counts = pad_to(counts, max_across_ranks(counts.numel(), group=group))
        if params.guard:
            check_same(tuple(counts.shape), "class-count shape", group=group)
        dist.all_reduce(counts, group=group)
        return counts
    # kind == "op": a local condition picks the collective
    counts = torch.bincount(labels, minlength=params.n_classes)
    saw_rare = bool((labels == params.rare_class).any())
    if params.mode == "static":
        gather = False  # no branch: the rare class is one more bin of the all-reduced histogram
    elif params.mode == "agree":
        gather = any_rank(saw_rare, group=group)
    else:
        gather = saw_rare
    if params.guard:
        check_same(gather, "all_gather branch taken", group=group)
    if gather:  # a per-rank breakdown for the log: who saw the rare class
        parts = [torch.zeros_like(counts) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, counts, group=group)
        return torch.stack(parts).sum(0)
    dist.all_reduce(counts, group=group)
    return counts


def _classifier(params: Params) -> Any:
    from torch import nn

    return nn.Sequential(make_mlp(params.dim, hidden=64, depth=2), nn.GELU(), nn.Linear(params.dim, params.n_classes))


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training loop of the incident, one rank of it."""
    import torch
    import torch.nn.functional as F

    if params.odd_rank >= ctx.world_size:  # fewer ranks than the default assumes: the last one is odd
        params = dataclasses.replace(params, odd_rank=ctx.world_size - 1)
    checked = detail_group() if params.detail else None
    ddp = make_ddp(ctx, _classifier(params))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    total = None
    loss = torch.tensor(float("nan"))
    for step in range(params.steps):
        with ctx.tracer.step(step):
            x, labels = make_batch(ctx.rank, step, params)
            loss = F.cross_entropy(ddp(x.to(ctx.device)), labels.to(ctx.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's gradient ALLREDUCE
            opt.step()
            counts = log_class_counts(labels, params, group=checked)
            n = counts.numel() if total is None else max(total.numel(), counts.numel())
            total = pad_to(counts, n) if total is None else pad_to(total, n) + pad_to(counts, n)
    expected = params.steps * params.batch * ctx.world_size
    return {
        "samples_counted": int(total.sum()) if total is not None else 0,
        "samples_expected": expected,
        "histogram_ok": bool(total is not None and int(total.sum()) == expected),
        "final_loss": float(loss),
    }


def dtype_program(ctx: Any, dtype: str) -> dict[str, Any]:
    """The dtype face of the same bug: every rank all-reduces 8 ones in float32, the last rank in
    ``dtype`` (say its metric tensor came from another code path). Returns the rank's sum, which is
    ``8 * world_size`` when nothing went wrong."""
    import torch
    import torch.distributed as dist

    odd = ctx.rank == ctx.world_size - 1
    t = torch.ones(8, dtype=getattr(torch, dtype) if odd else torch.float32, device=ctx.device)
    dist.all_reduce(t)
    return {"sum": float(t.double().sum())}


def dtype_summary(results: Sequence[RunResult]) -> str:
    """What each run of :func:`dtype_program` did (``variant`` = the last rank's dtype): every rank's
    status, the sums it got (``8 x world size`` is right), and the diagnosis from the trace."""
    lines = []
    for r in results:
        sums = [None if r.metrics.get(p.rank, {}).get("sum") is None else round(float(r.metrics[p.rank]["sum"]), 1)
                for p in r.per_rank]
        lines.append(f"{r.variant}: ranks {[p.status.value for p in r.per_rank]}, sums {sums} "
                     f"(correct: {8.0 * r.world_size})")
        if r.diagnosis is not None:
            lines.append(f"  {r.diagnosis.verdict.value}, culprit {list(r.culprit_ranks)}: {r.diagnosis.message}")
    return "\n".join(lines)


SCENARIO = Scenario(
    id="collective-mismatch",
    title="One rank all-reduces a different shape (or calls a different collective)",
    symptom="abort with 'Received data size doesn't match expected size', or a timeout in a logging ALLREDUCE",
    seed="desync (rank-dependent control flow; no seed write-up)",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "bincount(labels) without minlength: rank 3's histogram has one more bin at step 2",
                expect_ok=False),
        Variant("static-shape", "rank-independent control flow: bincount(labels, minlength=n_classes), no branch",
                params={"mode": "static"}),
        Variant("agree-first", "agree before acting: max_across_ranks + pad_to for the length, any_rank for the branch",
                params={"mode": "agree"}),
    ),
    expected_culprits=lambda p, ws: (min(p.odd_rank, ws - 1),),
    expected_op="ALLREDUCE",
    notebook="08_collective_mismatch.ipynb",
    deadline_s=lambda p, t: 4 * t + 30,
)
