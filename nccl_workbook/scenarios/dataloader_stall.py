"""Scenario ``dataloader-stall`` (seed 000 §2: DataLoader timeout equal to the group timeout).

What happened: seed 000 ran ``DataLoader(num_workers=8, timeout=600)`` next to NCCL's 10-minute
default. When a rank's data loading hung (a read on shared storage that never returned), the
other ranks were already waiting in the next gradient all-reduce; the job died with
``WorkNCCL(SeqNum=668, OpType=ALLREDUCE, NumelIn=52, …) ran for 600097 milliseconds``: a
*collective* timeout on the other ranks, not a data error. Both clocks started at about the same
moment and ran out at about the same moment.

Here, scaled to seconds: 6 DDP steps on 4 ranks, each rank reading its shard through a real
``torch.utils.data.DataLoader`` with forked worker processes and a ``DistributedSampler``. On rank
``stall_rank`` the read of one sample of batch ``stall_step`` hangs for ``stall_s`` (6 s, twice the
3 s group timeout). The loader's timeout is ``loader_timeout_fraction`` times the group timeout
(1.0, as in the seed). The stalled rank then stays in its error handling with its group open until
its peers have timed out, as NCCL peers would (:func:`~nccl_workbook.scenarios._common.stay_like_nccl`;
``exit_seen_by_peers=True`` gives gloo's own behaviour). The hung read can be released (a shared
event), so every run ends with the rank's workers shut down and joined: no worker outlives a run.

Variants:

``broken``
    loader timeout = group timeout (3 s), 4 workers, prefetch 2: the stalled rank's
    ``DataLoader timed out after 3.0 seconds`` and the others' collective timeouts fire within
    milliseconds of each other; three of four ranks report a collective timeout.
``short-loader-timeout``
    the seed's fix, scaled: loader timeout a third of the group timeout (1 s; the seed went from
    600 s to 120 s next to 30 min), 2 workers, prefetch 1, and :class:`nccl_workbook.fixes.FailFast`
    so that every rank stops on the stalled rank's data error at once. The rank program then plays
    the launcher: it records why it stopped (metrics ``stop_reason``) and returns, so the run is
    ``ok`` (no rank hung or timed out) while the training did stop.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.dataloader import shutdown_workers
from nccl_workbook.fixes.failfast import FailFast
from nccl_workbook.scenarios._common import make_ddp, make_mlp, rank_stop_frame, stay_like_nccl
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "ShardDataset", "stop_frame", "race_summary"]


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 6
    stall_rank: int = 2
    #: the batch (0-based) one of whose samples hangs on ``stall_rank``
    stall_step: int = 3
    #: how long the hung read lasts (s); more than the group timeout
    stall_s: float = 6.0
    #: DataLoader timeout as a fraction of the group timeout (seed 000: 600 s / 600 s = 1.0)
    loader_timeout_fraction: float = 1.0
    num_workers: int = 4
    prefetch_factor: int = 2
    #: wrap the training in nccl_workbook.fixes.FailFast
    fail_fast: bool = False
    #: False: the stalled rank keeps its group open until its peers timed out (NCCL's behaviour);
    #: True: it leaves at once, and gloo tells its peers (gloo's behaviour)
    exit_seen_by_peers: bool = False
    batch: int = 16
    dim: int = 64

    def __post_init__(self) -> None:
        if not 0 <= self.stall_step < self.steps:
            raise ValueError(f"need 0 <= stall_step < steps, got stall_step={self.stall_step}, steps={self.steps}")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1 (a DataLoader timeout needs workers), got {self.num_workers}")
        if self.prefetch_factor < 1 or not self.loader_timeout_fraction > 0 or self.stall_s < 0:
            raise ValueError("need prefetch_factor >= 1, loader_timeout_fraction > 0, stall_s >= 0")


class ShardDataset:
    """A map-style dataset of seeded random vectors; reading an index in ``hang_indices`` hangs
    for ``hang_s`` (a read on shared storage that does not return) unless ``release`` is set."""

    def __init__(self, n: int, dim: int, hang_indices: frozenset[int] = frozenset(), hang_s: float = 0.0,
                 release: Any = None) -> None:
        self.n, self.dim, self.hang_indices, self.hang_s, self.release = n, dim, hang_indices, hang_s, release

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        import torch

        if index in self.hang_indices:
            if self.release is not None:
                self.release.wait(self.hang_s)
            else:
                time.sleep(self.hang_s)
        g = torch.Generator().manual_seed(index)
        return torch.randn(self.dim, generator=g)


def _stall_rank(params: Params, world_size: int) -> int:
    return min(params.stall_rank, world_size - 1)


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """One rank: DDP training fed by a DataLoader with workers; one rank's read hangs."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler

    n = params.steps * params.batch * ctx.world_size
    probe = ShardDataset(n, params.dim)
    sampler = DistributedSampler(probe, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=False)
    hang: frozenset[int] = frozenset()
    if ctx.rank == _stall_rank(params, ctx.world_size):
        hang = frozenset({list(sampler)[params.stall_step * params.batch]})
    mp = multiprocessing.get_context("fork")
    release = mp.Event()
    dataset = ShardDataset(n, params.dim, hang, params.stall_s, release)
    loader_timeout_s = round(params.loader_timeout_fraction * ctx.pg_timeout_s, 3)
    loader = DataLoader(dataset, batch_size=params.batch, sampler=sampler, num_workers=params.num_workers,
                        prefetch_factor=params.prefetch_factor, timeout=loader_timeout_s,
                        multiprocessing_context=mp, persistent_workers=False)
    state: dict[str, Any] = {"steps": 0, "failed_at_ns": None}
    it = None

    def train() -> None:
        # the model lives in this frame only: once a failure has left it, the group the DDP model
        # holds is released at once (on gloo that is what frees the peers), before the workers
        # are joined below
        ddp = make_ddp(ctx, make_mlp(params.dim))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        for i in range(params.steps):
            with ctx.tracer.step(i):
                with ctx.tracer.region("load_batch"):
                    t = time.time_ns()
                    try:
                        x = next(it)
                    except Exception:
                        state["failed_at_ns"] = t
                        raise
                x = x.to(ctx.device)
                loss = (ddp(x) - x).pow(2).mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()  # DDP's gradient ALLREDUCE: where the other ranks wait
                opt.step()
            state["steps"] = i + 1

    result: dict[str, Any] = {"stopped_early": False, "loader_timeout_s": loader_timeout_s}
    try:
        it = iter(loader)
        if params.fail_fast:
            try:
                with FailFast():
                    train()
                dist.barrier()
            except Exception as e:  # noqa: BLE001 - the launcher's job: stop cleanly, say why
                result.update(stopped_early=True, stop_reason=f"{type(e).__name__}: {e}"[:300])
        else:
            try:
                train()
                dist.barrier()
            except BaseException:
                if state["failed_at_ns"] is not None and not params.exit_seen_by_peers:
                    stay_like_nccl(ctx.pg_timeout_s, state["failed_at_ns"])
                raise
    finally:
        release.set()  # the hung read returns, so the worker can be joined
        if it is not None:
            shutdown_workers(it)
    return {"steps": state["steps"], **result}


def stop_frame(result: RunResult) -> pd.DataFrame:
    """Per rank: when it stopped, in seconds after the stalled rank *started waiting* for its batch
    (from the trace), its status, what it reported, and whether that names the data loader."""
    tr = result.trace
    failed = tr[(tr["kind"] == "region") & (tr["name"] == "load_batch") & (tr["status"] != "ok")] if tr is not None and len(tr) else None
    t_wait = int(failed["t_enqueue_ns"].min()) if failed is not None and len(failed) else None
    return rank_stop_frame(result, t_wait, cause_column="names_the_data_loader",
                           names_cause=lambda rank, text: "DataLoader" in text)


def race_summary(runs: Mapping[str, RunResult]) -> pd.DataFrame:
    """One row per labelled run, times in seconds after the stalled rank started waiting for its
    batch: when its data-loader error came, when the first *collective* timeout came on another
    rank (NaN: none), the margin between the two (positive: the data error came first), when the
    last rank stopped, and whether every rank's report names the data loader."""
    import pandas as pd

    rows = {}
    for label, r in runs.items():
        f = stop_frame(r)
        data = f[f["names_the_data_loader"] & f["reported"].str.contains("DataLoader timed out")]
        coll = f[(f["status"] == "timeout") & ~f["names_the_data_loader"]]
        t_data = float(data["stopped_after_s"].min()) if len(data) else float("nan")
        t_coll = float(coll["stopped_after_s"].min()) if len(coll) else float("nan")
        rows[label] = {
            "outcome": r.outcome.value,
            "data_error_after_s": t_data,
            "first_collective_timeout_after_s": t_coll,
            "margin_s": round(t_coll - t_data, 3),
            "last_rank_stopped_after_s": float(f["stopped_after_s"].max()),
            "every_rank_names_the_data_loader": bool(f["names_the_data_loader"].all()),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("run")


SCENARIO = Scenario(
    id="dataloader-stall",
    title="One rank's data loading stalls; the others time out in the all-reduce",
    symptom="ALLREDUCE timeout on the other ranks at the same moment as a DataLoader timeout on one rank",
    seed="000 §2",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 2's read hangs; DataLoader timeout = group timeout (3 s); 4 workers, prefetch 2",
                expect_ok=False),
        Variant("short-loader-timeout", "DataLoader timeout 1/3 of the group timeout, 2 workers, prefetch 1, and "
                "FailFast: every rank stops on rank 2's data error at once",
                params={"loader_timeout_fraction": 1 / 3, "num_workers": 2, "prefetch_factor": 1, "fail_fast": True}),
    ),
    expected_culprits=lambda p, ws: (_stall_rank(p, ws),),
    expected_op="ALLREDUCE",
    notebook="04_dataloader_stall.ipynb",
    deadline_s=lambda p, t: p.stall_s + 4 * t + 30,
)
