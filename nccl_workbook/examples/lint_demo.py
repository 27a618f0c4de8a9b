"""A small DDP training script with the hang hazards of the workbook planted in it, one per lint rule.

It reads like the scripts the scenarios come from (``torchrun --nproc-per-node 4 lint_demo.py``), and
``nccl-workbook lint`` reports each planted hazard; the comments marked ``HAZARD`` say which rule.
Run it for real only to watch it hang: that is the point. Like the other example scripts it
imports nothing from ``nccl_workbook``.
"""

from __future__ import annotations

import argparse
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset

# HAZARD noop-timeout-setting: nothing reads NCCL_TIMEOUT; the group keeps its default timeout
os.environ["NCCL_TIMEOUT"] = "3600"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--loader-timeout", type=int, default=600)
    return p.parse_args()


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.mse_loss(model(x), y).item()
    model.train()
    return total


def save_checkpoint(model: nn.Module, path: str) -> None:
    torch.save(model.state_dict(), path)
    dist.barrier()  # "make sure the file is there before anyone reads it"


def gather_predictions(model: nn.Module, loader: DataLoader, world_size: int) -> list[torch.Tensor]:
    out = []
    for x, _y in loader:
        pred = model(x)
        parts = [torch.empty_like(pred) for _ in range(world_size)]
        # HAZARD uneven-collective-count: the ranks' shards have different numbers of batches
        dist.all_gather(parts, pred)
        out.extend(parts)
    return out


def main() -> None:
    args = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=10))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0

    data = TensorDataset(torch.randn(1000, 16), torch.randn(1000, 1))
    train_loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data), num_workers=2,
                              # HAZARD dataloader-timeout-ge-pg-timeout: as long as the group's 10 minutes
                              timeout=args.loader_timeout)
    eval_shard = Subset(data, range(rank, 990, world_size))
    eval_loader = DataLoader(eval_shard, batch_size=64)

    model = DDP(nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            try:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
            # HAZARD exception-on-one-rank: this rank skips the batch; the others wait in backward
            except RuntimeError as exc:
                print(f"rank {rank}: skipping a batch: {exc}")
            opt.zero_grad()
        if is_main:
            # HAZARD rank0-long-work-before-collective: rank 0 evaluates, the others go on to
            # gather_predictions' all_gather (and the next epoch's gradient all-reduce) and wait there
            print("eval loss", evaluate(model.module, eval_loader))
        gather_predictions(model.module, eval_loader, world_size)
        if rank == 0:
            # HAZARD collective-in-rank-branch: save_checkpoint calls dist.barrier(), on rank 0 only
            save_checkpoint(model.module, f"ckpt_{epoch}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
