"""Scenario ``fd-exhaustion`` (seed 000 §4: "too many open files" with many DataLoader workers).

What happened: seed 000 lists "File Descriptor Exhaustion: Too many data loader workers (8 per
rank × 2 ranks = 16 workers) led to 'too many open files' errors" among the causes of its
``WorkNCCL(SeqNum=668, OpType=ALLREDUCE, …) ran for 600097 milliseconds`` timeouts, and cut the
workers from 8 to 4 per rank.

The mechanism, measured here: with torch's default sharing strategy (``file_descriptor``) every
tensor a worker sends to the main process arrives as an open file descriptor, held until the tensor
is freed. The main process also holds the batches that arrived ahead of the one it waits for, so
its open-file count grows with *its own* workers × ``prefetch_factor`` × tensors per batch. When it
reaches that process's ``RLIMIT_NOFILE``, the loader raises ``RuntimeError: Too many open files.
Communication with the workers is no longer possible. …``. That rank never reaches the next
gradient all-reduce; the other ranks wait in it. Under NCCL nobody tells them, so the failing rank
keeps its group open until they time out (:func:`~nccl_workbook.scenarios._common.stay_like_nccl`).

Here, scaled down: each sample is a dict of ``fields`` small tensors (9 tensors per batch with the
sample ids), 8 workers per rank, ``prefetch_factor=2``. Rank ``limited_rank`` runs with a soft
open-file limit of "what it has open at start + ``fd_headroom``" (the node's low ``ulimit -n``;
the limit is lowered on that engine for the run and always restored). Every rank counts its open
files (``/proc/self/fd``) after each batch; metrics ``fds_start``, ``fds_peak``, ``fd_limit``.
Two DDP steps on a fixed batch come before the loader starts: DDP re-orders its gradient buckets
once, at its second step, with a BROADCAST issued from C++ that the tracer cannot see; after them,
every step's first collective is the traced gradient ALLREDUCE.

Variants:

``broken``
    8 workers, ``file_descriptor``, rank 1's soft limit 56 above what it has open at start: rank 1
    runs out of files within its first batches; ranks 0, 2, 3 time out in the ALLREDUCE of that
    step.
``fewer-workers``
    2 workers per rank (the seed went from 8 to 4; notebook 05 measures 4 too).
``file-system-sharing``
    8 workers, :func:`nccl_workbook.fixes.use_file_system_sharing`: tensors travel by file name;
    the count stays near the workers' pipes.
``raise-limit``
    8 workers, :func:`nccl_workbook.fixes.raise_open_file_limit` at start-up: the soft limit goes
    up to the hard limit.

After every run the workers are shut down and joined (metric ``workers_left``: child processes of the
rank started during the run and still alive, not counting ``torch_shm_manager``, which the
``file_system`` strategy starts once per engine and which exits with it), and the rank's
open-file limit and sharing strategy are what they were before.
"""

from __future__ import annotations

import multiprocessing
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.dataloader import shutdown_workers
from nccl_workbook.fixes.fds import open_fd_count, raise_open_file_limit, sharing_strategy
from nccl_workbook.scenarios._common import make_ddp, make_mlp, stay_like_nccl, train_steps
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "FieldsDataset", "limited_rank", "workers_for", "fd_frame"]

SHARING = ("file_descriptor", "file_system")


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 10
    #: DDP steps on a fixed batch before the loader starts (numbered -2, -1)
    warmup_steps: int = 2
    #: DataLoader workers per rank
    workers: int = 8
    #: per-rank workers instead (rank r uses workers_by_rank[r % len]); for measuring fds vs workers
    workers_by_rank: tuple[int, ...] = ()
    prefetch_factor: int = 2
    #: small tensors per sample (each sample is a dict of them, plus its id)
    fields: int = 8
    #: the rank with the low open-file limit (clamped to the world size)
    limited_rank: int = 1
    #: that rank's soft limit is the files it has open at start plus this; 0: leave the limit alone
    fd_headroom: int = 56
    #: torch.multiprocessing sharing strategy for the run: "file_descriptor" (default) or "file_system"
    sharing: str = "file_descriptor"
    #: call nccl_workbook.fixes.raise_open_file_limit() at start-up (after the node's limit applies)
    raise_limit: bool = False
    batch: int = 8
    dim: int = 16

    def __post_init__(self) -> None:
        if self.sharing not in SHARING:
            raise ValueError(f"sharing must be one of {SHARING}, got {self.sharing!r}")
        if self.workers < 1 or any(w < 0 for w in self.workers_by_rank):
            raise ValueError(f"need workers >= 1 and workers_by_rank >= 0, got {self.workers}, {self.workers_by_rank}")
        if self.fd_headroom < 0 or self.fields < 1 or self.steps < 1 or self.prefetch_factor < 1:
            raise ValueError("need fd_headroom >= 0, fields >= 1, steps >= 1, prefetch_factor >= 1")


def limited_rank(params: Params, world_size: int) -> int:
    """The rank whose open-file limit is lowered."""
    return min(params.limited_rank, world_size - 1)


def workers_for(params: Params, rank: int) -> int:
    """DataLoader workers of ``rank``."""
    return params.workers_by_rank[rank % len(params.workers_by_rank)] if params.workers_by_rank else params.workers


class FieldsDataset:
    """Map-style dataset: sample ``i`` is ``{"id": i, "f0": …, "f{fields-1}": …}``, seeded small
    tensors (a multi-field sample, as in multi-modal or detection data)."""

    def __init__(self, n: int, fields: int, dim: int) -> None:
        self.n, self.fields, self.dim = n, fields, dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, Any]:
        import torch

        g = torch.Generator().manual_seed(index)
        sample = {f"f{j}": torch.randn(self.dim, generator=g) for j in range(self.fields)}
        sample["id"] = torch.tensor(index)
        return sample


def _children() -> set[int]:
    """Pids of this process's live child processes, other than torch's shared-memory manager
    (which the file_system strategy starts and which exits with this process)."""
    import psutil

    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and child.name() != "torch_shm_manager":
                pids.add(child.pid)
        except psutil.Error:
            continue
    return pids


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """One rank: DDP training fed by a DataLoader with many workers; one rank has few files."""
    import resource

    import torch
    from torch.utils.data import DataLoader

    workers = workers_for(params, ctx.rank)
    soft0, hard0 = resource.getrlimit(resource.RLIMIT_NOFILE)
    fds_start = open_fd_count()
    children_before = _children()  # the engine's own (its nanny); not the loader's
    state: dict[str, Any] = {"failed_at_ns": None, "peak": fds_start, "steps": 0}
    it = None
    try:
        if ctx.rank == limited_rank(params, ctx.world_size) and params.fd_headroom:
            # the node's `ulimit -n`: lowered for this run on this engine only, restored below
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(fds_start + params.fd_headroom, soft0), hard0))
        raised = raise_open_file_limit() if params.raise_limit else None
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        with sharing_strategy(params.sharing), warnings.catch_warnings():
            # torch warns that 8 workers are more than this 2-core machine should run: that is the point
            warnings.filterwarnings("ignore", message=".*worker processes in total.*")
            dataset = FieldsDataset(params.steps * params.batch, params.fields, params.dim)
            loader = DataLoader(dataset, batch_size=params.batch, num_workers=workers,
                                prefetch_factor=params.prefetch_factor if workers else None,
                                multiprocessing_context=multiprocessing.get_context("fork") if workers else None,
                                persistent_workers=False)

            def train() -> None:
                # the DDP model lives in this frame only, so that it is released when a failure leaves it
                nonlocal it
                ddp = make_ddp(ctx, make_mlp(params.dim))
                opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
                # warm-up on a fixed batch before the loader starts: DDP re-orders its gradient
                # buckets once, at its second step, with a BROADCAST issued from C++ that the tracer
                # cannot see; after these two steps every step's first collective is the ALLREDUCE
                train_steps(ctx, ddp, opt, params.warmup_steps, first_step=-params.warmup_steps, batch=params.batch)
                it = iter(loader)
                for i in range(params.steps):
                    with ctx.tracer.step(i):
                        with ctx.tracer.region("load_batch"):
                            t = time.time_ns()
                            try:
                                batch = next(it)
                            except Exception:
                                state["failed_at_ns"] = t
                                raise
                        state["peak"] = max(state["peak"], open_fd_count())
                        x = torch.stack([batch[f"f{j}"] for j in range(params.fields)], dim=1).mean(dim=1).to(ctx.device)
                        loss = (ddp(x) - x).pow(2).mean()
                        opt.zero_grad(set_to_none=True)
                        loss.backward()  # DDP's gradient ALLREDUCE: where the other ranks wait
                        opt.step()
                    state["steps"] = i + 1

            try:
                train()
            except BaseException:
                if state["failed_at_ns"] is not None:
                    stay_like_nccl(ctx.pg_timeout_s, state["failed_at_ns"])
                raise
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft0, hard0))  # room to shut the workers down
                if it is not None:
                    shutdown_workers(it)
                it = None
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft0, hard0))
    return {
        "workers": workers,
        "fds_start": fds_start,
        "fds_peak": state["peak"],
        "fd_limit": int(fd_limit),
        "limit_raised_to": None if raised is None else raised.soft,
        "sharing": params.sharing,
        "workers_left": len(_children() - children_before),
    }


def fd_frame(results: Sequence[RunResult], *, ranks: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per (run, rank): workers, sharing strategy, the rank's soft open-file limit and its
    peak open files *above what it had open at start*, workers left after the run, and how the
    rank ended. A run that failed on a rank has no numbers for it (a failed rank returns none)."""
    import pandas as pd

    rows = []
    for r in results:
        for out in r.per_rank:
            if ranks is not None and out.rank not in ranks:
                continue
            m = r.metrics.get(out.rank, {})
            start = m.get("fds_start")
            rows.append({
                "run": r.variant, "rank": out.rank, "workers": m.get("workers"), "sharing": m.get("sharing"),
                "limit_above_start": None if start is None or m.get("fd_limit", 0) > 10_000 else m["fd_limit"] - start,
                "peak_above_start": None if start is None else m["fds_peak"] - start,
                "workers_left": m.get("workers_left"), "status": out.status.value, "error": (out.error or "")[:90],
            })
    return pd.DataFrame(rows).set_index(["run", "rank"])


SCENARIO = Scenario(
    id="fd-exhaustion",
    title="One rank runs out of open files in its DataLoader; the others hang in the all-reduce",
    symptom="'Too many open files. Communication with the workers is no longer possible' on one rank, "
            "ALLREDUCE timeout on the others",
    seed="000 §4",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "8 workers per rank, file_descriptor sharing; rank 1's open-file limit is 56 above "
                "what it has open at start", expect_ok=False),
        Variant("fewer-workers", "2 workers per rank", params={"workers": 2}),
        Variant("file-system-sharing", "8 workers, torch.multiprocessing file_system sharing strategy "
                "(fixes.use_file_system_sharing)", params={"sharing": "file_system"}),
        Variant("raise-limit", "8 workers, soft open-file limit raised to the hard limit at start-up "
                "(fixes.raise_open_file_limit)", params={"raise_limit": True}),
    ),
    expected_culprits=lambda p, ws: (limited_rank(p, ws),),
    expected_op="ALLREDUCE",
    notebook="05_fd_exhaustion.ipynb",
)
