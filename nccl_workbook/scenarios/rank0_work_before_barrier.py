"""Scenario ``rank0-work-before-barrier`` (seed 002; the same shape as seed 000's end barrier).

What happened: after epoch 10, rank 0 alone generated sample images (10 DDIM steps + VAE decode,
more than 10 minutes) and then called ``dist.barrier()``; ranks 1..N-1 reached the barrier at
once and waited. After the 10-minute default timeout their watchdogs fired:
``WorkNCCL(SeqNum=6764, OpType=ALLREDUCE, NumelIn=1, …) ran for 600006 milliseconds``.
Nothing was hung: rank 0 was simply busy for longer than the timeout.

Here, scaled to seconds: a few DDP training steps, then rank 0 generates ``n_samples`` samples
with a small denoiser (``seconds_per_sample`` each, paced), then every rank calls the barrier,
trains one more epoch, and meets at a final barrier (seed 000's ending, reached only on success).

Variants:

``broken``
    rank 0 generates for ``n_samples * seconds_per_sample`` (4.8 s) while the others wait in
    ``barrier()`` under a 3 s group timeout: they time out; rank 0 then finds its peers gone.
``longer-timeout``
    the seed's fix: the group timeout is raised above the generation time (3x it). It works; the
    cost is that a real hang anywhere now takes that long to be detected.
``side-barrier``
    the main group keeps its short timeout; the waiting ranks wait on a dedicated gloo group with
    its own long timeout (:func:`nccl_workbook.fixes.wait_for_main`).
``shard-work``
    every rank generates its share of the samples (:func:`nccl_workbook.fixes.sharded`): nobody
    idles, the gather at the end sees all ranks within a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nccl_workbook.fixes.rank0_work import new_side_group, sharded, wait_for_main
from nccl_workbook.scenarios._common import make_ddp, make_mlp, paced, train_steps
from nccl_workbook.scenarios.base import Scenario, Variant

__all__ = ["Params", "program", "SCENARIO", "generate_sample"]


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps_per_epoch: int = 3
    epochs: int = 2
    #: generate samples after this epoch (0-based), like the seed's "every 10 epochs"
    sample_after_epoch: int = 0
    n_samples: int = 8
    seconds_per_sample: float = 0.6
    denoise_steps: int = 10
    #: "rank0" (rank 0 generates, others wait in a barrier), "side-barrier" or "shard"
    mode: str = "rank0"
    #: timeout of the side group used by mode="side-barrier"
    side_timeout_s: float = 60.0
    dim: int = 64

    def __post_init__(self) -> None:
        if self.mode not in {"rank0", "side-barrier", "shard"}:
            raise ValueError(f"mode must be 'rank0', 'side-barrier' or 'shard', got {self.mode!r}")
        if self.n_samples < 1 or self.seconds_per_sample < 0:
            raise ValueError("need n_samples >= 1 and seconds_per_sample >= 0")

    @property
    def generation_s(self) -> float:
        """How long generating all samples takes on one rank."""
        return self.n_samples * self.seconds_per_sample


def generate_sample(denoiser: Any, index: int, params: Params) -> Any:
    """One sample: ``denoise_steps`` steps of a small denoiser from seeded noise (real compute),
    paced to ``seconds_per_sample`` as on a GPU."""
    import torch

    def work() -> Any:
        g = torch.Generator().manual_seed(index)
        x = torch.randn(1, params.dim, generator=g).to(next(denoiser.parameters()).device)
        with torch.no_grad():
            for _ in range(params.denoise_steps):
                x = x - 0.1 * denoiser(x)
        return x

    return paced(params.seconds_per_sample, work)


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training script of the incident, one rank of it."""
    import torch
    import torch.distributed as dist

    side = new_side_group(params.side_timeout_s) if params.mode == "side-barrier" else None
    ddp = make_ddp(ctx, make_mlp(params.dim))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    denoiser = ddp.module
    generated = 0
    step = 0
    for epoch in range(params.epochs):
        step = train_steps(ctx, ddp, opt, params.steps_per_epoch, first_step=step)
        if epoch != params.sample_after_epoch:
            continue
        if params.mode == "rank0":
            if ctx.is_main:
                with ctx.tracer.region("generate_samples"):
                    generated = len([generate_sample(denoiser, i, params) for i in range(params.n_samples)])
            dist.barrier()  # the seed's barrier: ranks 1..N-1 wait here for rank 0
        elif params.mode == "side-barrier":
            def gen_all() -> int:
                with ctx.tracer.region("generate_samples"):
                    return len([generate_sample(denoiser, i, params) for i in range(params.n_samples)])

            generated = wait_for_main(gen_all, group=side) or 0
        else:  # shard
            with ctx.tracer.region("generate_samples"):
                samples = sharded(lambda i: generate_sample(denoiser, i, params), params.n_samples)
            generated = len(samples) if ctx.is_main else 0
    # seed 000's ending: everyone meets once more, only reached when training succeeded
    dist.barrier()
    return {"samples_generated": generated, "steps": step}


SCENARIO = Scenario(
    id="rank0-work-before-barrier",
    title="Rank 0 generates samples while the others wait in a barrier",
    symptom="ALLREDUCE/BARRIER timeout on every rank but 0 right after an epoch boundary",
    seed="002 (and 000's final barrier)",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 0 generates samples for longer than the group timeout; the others wait in barrier()",
                expect_ok=False),
        Variant("longer-timeout", "the seed's fix: group timeout raised to 3x the generation time",
                pg_timeout_s=lambda t, p: max(t, 3 * p.generation_s)),
        Variant("side-barrier", "waiting ranks wait on a gloo side group with a long timeout; main group keeps its short one",
                params={"mode": "side-barrier"}),
        Variant("shard-work", "every rank generates its share of the samples; nobody idles",
                params={"mode": "shard"}),
    ),
    expected_culprits=lambda p, ws: (0,),
    expected_op="BARRIER",
    notebook="01_rank0_work_before_barrier.ipynb",
    deadline_s=lambda p, t: 2 * p.generation_s + 4 * t + 30,
)
