"""Scenario ``uneven-eval-allgather`` (seed 001: ALLGATHER timeouts while testing).

What happened: seed 001's job timed out in ``ALLGATHER`` operations after 600 s "during testing".
Its write-up blamed NCCL settings, resource contention and DDP options, and changed all of them
(``NCCL_TIMEOUT``, ``NCCL_IB_DISABLE=1``, ``NCCL_P2P_DISABLE=1``, smaller batches, fewer workers,
``find_unused_parameters=True``). An evaluation that all-gathers per batch hangs exactly like that
when the ranks' shards of the test set give them different numbers of batches: the ranks with one
batch more call one ``all_gather`` more, and wait in it for ranks that have already left the loop.

Here: 50 test samples split into contiguous shards without padding (13, 13, 12, 12 on 4 ranks, as
detectron2's ``InferenceSampler`` splits), batches of 4: ranks 0 and 1 have 4 batches, ranks 2 and
3 have 3. Each batch's (sample index, prediction, label) rows are all-gathered on the main group.
After the loop each rank gathers its summary (a Python object) with ``all_gather_object`` on a
gloo side group, as detectron2's ``comm.all_gather`` does for objects. So ranks 2 and 3 wait there,
on another group, and are simply absent from the 4th ALLGATHER of the main group; ranks 0 and 1
wait in it until the group timeout. This is what NCCL sees too: had the early ranks called a
collective on the *same* group instead, it would pair with the ALLGATHER as a mismatch (which gloo
may turn into a wrong result or an abort, see the collective-mismatch scenario).

Before the first all-gather every rank reads its first batch and the ranks meet once on the side
group (its long timeout absorbs a slow loader start on a loaded machine); that is harness, not part
of the incident.

The metric (accuracy of a small seeded classifier over all 50 samples) is computed on every rank
from the gathered rows and compared with the same metric computed on one process (``exact``).

Variants:

``broken``
    uneven shards, one ALLGATHER per batch: ranks 0 and 1 time out in ALLGATHER #4; ranks 2, 3
    (the culprits: missing from it) see their peers leave.
``even-sampler``
    ``DistributedSampler(shuffle=False)`` pads every shard to 13 by repeating samples; the rows are
    de-duplicated by sample index after the gather (:func:`nccl_workbook.fixes.unique_by_index`).
    Without that step two samples are counted twice (metric ``accuracy_with_repeats``).
``gather-counts``
    the ranks agree on the number of batches first (:func:`nccl_workbook.fixes.max_across_ranks`,
    one ALLREDUCE); a rank that runs out sends padding rows.
``join``
    ``torch.distributed.algorithms.Join`` with :func:`nccl_workbook.fixes.UnevenAllGather`: ranks
    that ran out answer the others' all-gathers with padding; one extra small ALLREDUCE per batch.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.dataloader import shutdown_workers
from nccl_workbook.fixes.rank0_work import shard_indices
from nccl_workbook.fixes.uneven import PAD_INDEX, UnevenAllGather, max_across_ranks, unique_by_index
from nccl_workbook.scenarios._common import make_mlp
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "EvalDataset", "samples_per_rank", "batches_per_rank", "early_ranks",
           "reference_accuracy", "metric_frame"]

SAMPLERS = ("shards", "padded")
MODES = ("per-batch", "gather-counts", "join")


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    n_samples: int = 50
    batch_size: int = 4
    #: "shards": contiguous shards, no padding (uneven); "padded": DistributedSampler(shuffle=False)
    sampler: str = "shards"
    #: "per-batch": one all_gather per batch; "gather-counts": agree on the batch count first;
    #: "join": torch's Join context manager with fixes.UnevenAllGather
    mode: str = "per-batch"
    #: workers of the evaluation DataLoader (0: the rank reads its samples itself)
    num_workers: int = 0
    #: timeout of the gloo side group for the results, as a multiple of the main group's
    side_timeout_factor: float = 3.0
    dim: int = 16
    classes: int = 5

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.n_samples < 1 or self.batch_size < 1 or self.num_workers < 0:
            raise ValueError("need n_samples >= 1, batch_size >= 1, num_workers >= 0")
        if not self.side_timeout_factor > 1:
            raise ValueError(f"side_timeout_factor must be > 1 (the side group waits longer), got {self.side_timeout_factor}")
        if not 2 <= self.classes <= self.dim:
            raise ValueError(f"need 2 <= classes <= dim, got classes={self.classes}, dim={self.dim}")


def samples_per_rank(params: Params, world_size: int) -> list[int]:
    """How many samples each rank evaluates (padding included for ``sampler="padded"``)."""
    if params.sampler == "padded":
        return [math.ceil(params.n_samples / world_size)] * world_size
    return [len(shard_indices(params.n_samples, r, world_size)) for r in range(world_size)]


def batches_per_rank(params: Params, world_size: int) -> list[int]:
    """How many batches each rank's loader yields."""
    return [math.ceil(n / params.batch_size) for n in samples_per_rank(params, world_size)]


def early_ranks(params: Params, world_size: int) -> tuple[int, ...]:
    """The ranks with fewer batches than the most (absent from the last per-batch ALLGATHERs)."""
    counts = batches_per_rank(params, world_size)
    return tuple(r for r, c in enumerate(counts) if c < max(counts))


class EvalDataset:
    """Map-style test set: sample ``i`` is ``(x_i, i, label_i)`` with a seeded ``x_i`` and
    ``label_i = argmax(x_i[:classes])``."""

    def __init__(self, n: int, dim: int, classes: int) -> None:
        self.n, self.dim, self.classes = n, dim, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[Any, int, int]:
        import torch

        x = torch.randn(self.dim, generator=torch.Generator().manual_seed(index))
        return x, index, int(x[: self.classes].argmax())


def _classifier(params: Params) -> Any:
    import torch
    from torch import nn

    model = nn.Sequential(make_mlp(params.dim, seed=0), nn.Linear(params.dim, params.classes))
    torch.manual_seed(1)
    nn.init.normal_(model[1].weight)
    return model.eval()


def reference_accuracy(params: Params) -> tuple[int, int]:
    """(correct, total) of the classifier over the whole test set, on one process."""
    import torch

    model, ds = _classifier(params), EvalDataset(params.n_samples, params.dim, params.classes)
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.tensor([ds[i][2] for i in range(len(ds))])
    with torch.no_grad():
        return int((model(x).argmax(1) == y).sum()), len(ds)


def _pack(idx: Any, pred: Any, label: Any, batch_size: int) -> Any:
    """(index, prediction, label) rows padded to ``batch_size`` rows with index PAD_INDEX."""
    import torch

    rows = torch.full((batch_size, 3), PAD_INDEX, dtype=torch.int64)
    if idx is not None:
        n = len(idx)
        rows[:n, 0], rows[:n, 1], rows[:n, 2] = idx, pred, label
    return rows


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """One rank: evaluate its shard, all-gather every batch's rows, then the summaries on a side group."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.utils.data import DataLoader, DistributedSampler

    ws, bs = ctx.world_size, params.batch_size
    side = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=params.side_timeout_factor * ctx.pg_timeout_s))
    model = _classifier(params)
    dataset = EvalDataset(params.n_samples, params.dim, params.classes)
    sampler: Any = (DistributedSampler(dataset, num_replicas=ws, rank=ctx.rank, shuffle=False)
                    if params.sampler == "padded" else list(shard_indices(params.n_samples, ctx.rank, ws)))
    loader = DataLoader(dataset, batch_size=bs, sampler=sampler, num_workers=params.num_workers,
                        multiprocessing_context=multiprocessing.get_context("fork") if params.num_workers else None)
    gathered: list[Any] = []
    it = None
    extra: dict[str, Any] = {}

    def gather_batch(rows: Any) -> None:
        rows = rows.to(ctx.device)  # NCCL takes no CPU tensors
        out = [torch.empty_like(rows) for _ in range(ws)]
        dist.all_gather(out, rows)  # the per-batch ALLGATHER where the late ranks wait
        gathered.extend(out)

    try:
        with torch.no_grad(), warnings.catch_warnings():  # Join changes the warnings filter: keep it local
            it = iter(loader)
            # harness, not the incident: every rank's first batch is read and the ranks meet on the
            # side group (long timeout) before the first all-gather, so that a loader starting its
            # workers slowly on a loaded machine is not mistaken for the hang this scenario is about
            with ctx.tracer.region("loader_start"):
                first = next(it, None)
                dist.barrier(group=side)

            def batches() -> Iterator[Any]:
                batch = first
                while batch is not None:
                    yield batch
                    batch = next(it, None)

            if params.mode == "per-batch":
                for b, (x, idx, y) in enumerate(batches()):
                    with ctx.tracer.step(b):
                        gather_batch(_pack(idx, model(x).argmax(1), y, bs))
            elif params.mode == "gather-counts":
                n_steps = max_across_ranks(len(loader))
                source = batches()
                for b in range(n_steps):
                    with ctx.tracer.step(b):
                        batch = next(source, None)
                        if batch is None:
                            gather_batch(_pack(None, None, None, bs))
                        else:
                            x, idx, y = batch
                            gather_batch(_pack(idx, model(x).argmax(1), y, bs))
                extra["steps_agreed"] = n_steps
            else:  # join
                gather = UnevenAllGather((bs, 3), device=ctx.device)
                with Join([gather]):
                    for b, (x, idx, y) in enumerate(batches()):
                        with ctx.tracer.step(b):
                            gather(_pack(idx, model(x).argmax(1), y, bs))
                gathered.extend(gather.gathered)
                extra["shadow_gathers"] = gather.shadow_calls
        # each rank's summary, a Python object, on the gloo side group (detectron2's comm.all_gather)
        summaries: list[Any] = [None] * ws
        with ctx.tracer.region("gather_summaries"):
            dist.all_gather_object(summaries, {"rank": ctx.rank, "batches": len(loader)}, group=side)
    finally:
        if it is not None:
            shutdown_workers(it)
    rows = torch.cat(gathered).cpu() if gathered else torch.empty(0, 3, dtype=torch.int64)
    real = rows[rows[:, 0] != PAD_INDEX]
    unique = unique_by_index(rows)
    correct, total = reference_accuracy(params)
    acc = float((unique[:, 1] == unique[:, 2]).float().mean()) if len(unique) else float("nan")
    return {
        "batches": len(loader),
        "batches_max": max(s["batches"] for s in summaries),
        "rows_gathered": len(real),
        "samples_counted": len(unique),
        "accuracy": round(acc, 6),
        "accuracy_with_repeats": round(float((real[:, 1] == real[:, 2]).float().mean()), 6) if len(real) else None,
        "reference_accuracy": round(correct / total, 6),
        "exact": bool(len(unique) == total and int((unique[:, 1] == unique[:, 2]).sum()) == correct
                      and unique[:, 0].tolist() == list(range(total))),
        **extra,
    }


def metric_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per run: outcome, each rank's batch count, and on rank 0: rows gathered (padding
    dropped), samples counted once, the accuracy, the accuracy counting repeated samples, the
    single-process reference, and whether every rank's metric is exact."""
    import pandas as pd

    rows = []
    for r in results:
        m0 = r.metrics.get(0, {})
        rows.append({
            "run": r.variant, "outcome": r.outcome.value,
            "batches_by_rank": [r.metrics.get(k, {}).get("batches") for k in range(r.world_size)],
            "rows_gathered": m0.get("rows_gathered"), "samples_counted": m0.get("samples_counted"),
            "accuracy": m0.get("accuracy"), "accuracy_with_repeats": m0.get("accuracy_with_repeats"),
            "reference": m0.get("reference_accuracy"),
            "exact_on_every_rank": bool(r.metrics) and all(m.get("exact") for m in r.metrics.values()),
        })
    return pd.DataFrame(rows).set_index("run")


SCENARIO = Scenario(
    id="uneven-eval-allgather",
    title="Uneven evaluation shards: the ranks with one batch more wait in ALLGATHER",
    symptom="ALLGATHER timeout during evaluation on the ranks with the most batches; the others already left the loop",
    seed="001",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "contiguous shards of 13, 13, 12, 12 samples, batches of 4, one all_gather per batch",
                expect_ok=False),
        Variant("even-sampler", "DistributedSampler pads every shard to 13; repeated samples dropped after the gather",
                params={"sampler": "padded"}),
        Variant("gather-counts", "agree on the number of batches first (one ALLREDUCE MAX); padding rows when out of data",
                params={"mode": "gather-counts"}),
        Variant("join", "torch.distributed.algorithms.Join with fixes.UnevenAllGather", params={"mode": "join"}),
    ),
    expected_culprits=lambda p, ws: early_ranks(p, ws),
    expected_op="ALLGATHER",
    notebook="06_uneven_eval_allgather.ipynb",
    deadline_s=lambda p, t: p.side_timeout_factor * t + 4 * t + 30,
)
