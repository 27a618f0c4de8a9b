"""Explicit collectives for the py-spy captures: every rank calls ``all_gather_object`` (a metrics
gather) then ``barrier``; ``--late-rank`` reaches them ``--late-s`` seconds late (sleeping in
``compute_metrics``). Rank 0 gathers; everyone else waits in the all-gather."""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist


def compute_metrics(rank: int, late_rank: int, late_s: float) -> dict[str, float]:
    if rank == late_rank:
        time.sleep(late_s)
    return {"rank": float(rank), "loss": float(torch.rand(1))}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--late-rank", type=int, default=2)
    p.add_argument("--late-s", type=float, default=30.0)
    p.add_argument("--out-dir", default=None)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    if rank == 0:
        print("entering the all-gather", flush=True)
    gathered: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, compute_metrics(rank, args.late_rank, args.late_s))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
