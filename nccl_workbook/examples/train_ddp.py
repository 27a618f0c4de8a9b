"""A small DDP training script, written the way many people write theirs (nanoGPT's shape).

Launch it with torchrun; it reads RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR from the
environment that torchrun sets::

    torchrun --standalone --nproc_per_node=4 train_ddp.py --steps 20

gloo on CPU, nccl when CUDA is available (one GPU per local rank). A synthetic token dataset is
sharded with a DistributedSampler; a tiny MLP language model is trained with AdamW under DDP;
rank 0 alone evaluates and saves a checkpoint every ``--eval-interval`` steps, while the other
ranks go on into the next step's gradient all-reduce (the pattern of nanoGPT's ``train.py``).

Faults, each off by default, planted to reproduce real collective timeouts:

``--fault rank0-eval``
    rank 0's evaluation takes ``--stall-s`` seconds (a validation set that grew); the other ranks
    wait in DDP's gradient all-reduce of the next step.
``--fault stall-data --fault-rank R``
    rank R's read of one batch stalls for ``--stall-s`` seconds (slow shared storage); the others
    wait in the all-reduce.
``--fault raise --fault-rank R``
    rank R raises an exception at step ``--fault-step``.
``--fault skip-step --fault-rank R``
    rank R skips the step ``--fault-step`` (a "skip bad batch" branch taken on one rank only): it
    runs one collective ahead of the others and leaves the loop first.

With ``--pg-timeout-s`` shorter than ``--stall-s`` a stall becomes a collective timeout.

The fix for the first one, ``--eval-sync side-group``: every rank waits for rank 0's evaluation in
a barrier on a gloo group of its own with a long timeout (``--side-timeout-s``), so the main group's
timeout keeps guarding the training collectives (the workbook's ``fixes.wait_for_main`` does the
same as a function).

This script is the "user's unchanged script": it imports nothing from the workbook.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import math
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

FAULTS = ("none", "rank0-eval", "stall-data", "raise", "skip-step")


def get_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step")
    p.add_argument("--block-size", type=int, default=16, help="context length in tokens")
    p.add_argument("--vocab-size", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes per rank")
    p.add_argument("--eval-interval", type=int, default=10, help="evaluate and checkpoint every N steps (rank 0)")
    p.add_argument("--eval-iters", type=int, default=4, help="validation batches per evaluation")
    p.add_argument("--log-interval", type=int, default=5)
    p.add_argument("--out-dir", default=None, help="checkpoint folder (default: a folder under the temp dir)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--pg-timeout-s", type=float, default=None,
                   help="init_process_group(timeout=) in seconds (default: torch's)")
    p.add_argument("--step-sleep-s", type=float, default=0.0,
                   help="extra time per step on every rank, standing in for a bigger model (default 0)")
    p.add_argument("--eval-sync", choices=("none", "side-group"), default="none",
                   help="side-group: the other ranks wait for rank 0's evaluation in a barrier on a gloo group "
                        "with a long timeout (--side-timeout-s), instead of in the next step's gradient all-reduce")
    p.add_argument("--side-timeout-s", type=float, default=600.0, help="the side group's timeout (default 600)")
    p.add_argument("--fault", choices=FAULTS, default="none", help="plant a fault (default none)")
    p.add_argument("--fault-rank", type=int, default=1, help="the rank that misbehaves (default 1)")
    p.add_argument("--fault-step", type=int, default=5,
                   help="the step at which stall-data / raise / skip-step happen (default 5)")
    p.add_argument("--stall-s", type=float, default=30.0,
                   help="how long the stalled data read or rank 0's evaluation lasts (default 30)")
    return p.parse_args(argv)


# -----------------------------------------------------------------------------
# data


class TokenShards(Dataset):
    """Synthetic "tokenized corpus": fixed pseudo-random sequences, as if read from shard files."""

    def __init__(self, n_seqs: int, block_size: int, vocab_size: int, seed: int,
                 stall_index: int | None = None, stall_s: float = 0.0) -> None:
        g = torch.Generator().manual_seed(seed)
        # a learnable pattern: each token is the previous one plus a small step, mod vocab
        start = torch.randint(0, vocab_size, (n_seqs, 1), generator=g)
        steps = torch.randint(1, 3, (n_seqs, block_size + 1), generator=g).cumsum(1)
        self.data = (start + steps) % vocab_size
        self.stall_index = stall_index
        self.stall_s = stall_s

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.read_block(idx)
        return chunk[:-1], chunk[1:]

    def read_block(self, idx: int) -> torch.Tensor:
        if idx == self.stall_index:
            time.sleep(self.stall_s)  # planted fault: this read hangs on slow shared storage
        return self.data[idx]


# -----------------------------------------------------------------------------
# model


class TinyLM(nn.Module):
    """Embeds the context, mixes it with an MLP, predicts the next token at every position."""

    def __init__(self, vocab_size: int, block_size: int, n_embd: int, hidden: int) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, hidden), nn.GELU(), nn.Linear(hidden, n_embd))
        self.ln = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        x = x + self.mlp(x)
        logits = self.head(self.ln(x))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


# -----------------------------------------------------------------------------
# evaluation and checkpointing (rank 0 only, as in nanoGPT)


@torch.no_grad()
def estimate_loss(model: nn.Module, loader: DataLoader, eval_iters: int, device: torch.device,
                  min_s: float = 0.0) -> float:
    """Mean validation loss over ``eval_iters`` batches, going round the loader for at least
    ``min_s`` seconds (the planted rank0-eval fault: a validation set that grew)."""
    model.eval()
    losses = []
    t0 = time.monotonic()
    while len(losses) < eval_iters or time.monotonic() - t0 < min_s:
        for x, y in loader:
            _, loss = model(x.to(device), y.to(device))
            losses.append(loss.item())
            if len(losses) >= eval_iters and time.monotonic() - t0 >= min_s:
                break
    model.train()
    return sum(losses) / len(losses)


def save_checkpoint(model: nn.Module, optimizer: torch.optim.Optimizer, step: int, out_dir: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "ckpt.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path)
    return path


# -----------------------------------------------------------------------------
# training


def main(argv: list[str] | None = None) -> int:
    args = get_args(argv)
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        timeout = datetime.timedelta(seconds=args.pg_timeout_s) if args.pg_timeout_s else None
        dist.init_process_group(backend=backend, timeout=timeout)
        rank, world_size = dist.get_rank(), dist.get_world_size()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if backend == "nccl":
            device = torch.device(f"cuda:{local_rank}")
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
    else:
        rank, world_size, device = 0, 1, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    master = rank == 0
    # the fix for rank-0-only evaluation: wait for it somewhere with a timeout meant for it
    side = (dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=args.side_timeout_s))
            if ddp and args.eval_sync == "side-group" else None)
    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts them)
    out_dir = args.out_dir or os.path.join(tempfile.gettempdir(), f"train_ddp-{os.getuid()}")

    # data: each rank sees its own shard of the training set
    n_train = args.batch_size * world_size * (args.steps + 1)
    train_set = TokenShards(n_train, args.block_size, args.vocab_size, args.seed)
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
    if args.fault == "stall-data" and rank == args.fault_rank:
        # the first sample of this rank's batch number fault_step hangs when it is read
        order = list(sampler)
        train_set.stall_index, train_set.stall_s = order[args.fault_step * args.batch_size], args.stall_s
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler,
                              num_workers=args.num_workers, drop_last=True)
    val_set = TokenShards(args.batch_size * args.eval_iters, args.block_size, args.vocab_size, args.seed + 1)
    val_loader = DataLoader(val_set, batch_size=args.batch_size)

    model = TinyLM(args.vocab_size, args.block_size, args.n_embd, args.hidden).to(device)
    raw_model = model
    if ddp:
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(raw_model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    if master:
        n_params = sum(p.numel() for p in raw_model.parameters())
        print(f"world_size={world_size} backend={dist.get_backend() if ddp else 'none'} "
              f"params={n_params} steps={args.steps} fault={args.fault}", flush=True)

    t0 = time.time()
    step = 0
    data_iter = iter(train_loader)
    while step < args.steps:
        x, y = next(data_iter)
        x, y = x.to(device), y.to(device)

        if args.fault == "raise" and rank == args.fault_rank and step == args.fault_step:
            raise RuntimeError(f"planted fault: rank {rank} failed at step {step}")
        if args.fault == "skip-step" and rank == args.fault_rank and step == args.fault_step:
            # "skip a bad batch", decided on one rank only: it now runs one collective ahead
            step += 1
            continue

        # cosine learning-rate schedule
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * step / max(1, args.steps)))
        for group in optimizer.param_groups:
            group["lr"] = lr

        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        if args.step_sleep_s:
            time.sleep(args.step_sleep_s)
        step += 1

        if master and step % args.log_interval == 0:
            print(f"step {step}: loss {loss.item():.4f}, lr {lr:.2e}, {time.time() - t0:.2f} s", flush=True)
        if master and step % args.eval_interval == 0:
            min_s = args.stall_s if args.fault == "rank0-eval" else 0.0
            val_loss = estimate_loss(raw_model, val_loader, args.eval_iters, device, min_s=min_s)
            path = save_checkpoint(raw_model, optimizer, step, out_dir)
            print(f"step {step}: val loss {val_loss:.4f}, checkpoint {path}", flush=True)
        if side is not None and step % args.eval_interval == 0:
            dist.barrier(group=side)  # everyone waits here for rank 0, on the side group's long timeout

    if master:
        print(f"done: {args.steps} steps in {time.time() - t0:.2f} s", flush=True)
    if ddp:
        dist.barrier()
        # drop DDP (its C++ reducer holds the group) before destroying the group: measured on torch
        # 2.13 gloo, destroying the group under a live DDP model aborted 2-5 runs in 10 at exit
        # ("terminate called without an active exception", SIGABRT), 0 in 15 with this order
        del model
        gc.collect()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
