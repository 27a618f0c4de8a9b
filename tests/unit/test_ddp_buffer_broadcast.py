"""The mechanism behind the lint's rule on a forward of the DDP-wrapped model on some ranks only: DDP broadcasts
the module's buffers from rank 0 at the first forward after a training step. A rank-0 evaluation through the DDP
model in the middle of training pairs with the others' next forward; after the last step nobody joins it
(train-llm-from-scratch PR 32, open_clip issue 1121). Two gloo ranks on CPU, torch as installed."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from .gloo_ranks import run_two_ranks


class _Net(torch.nn.Module):
    def __init__(self, buffers: bool) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        if buffers:
            self.register_buffer("mask", torch.ones(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x * self.mask) if hasattr(self, "mask") else self.lin(x)


def _rank(rank: int, init: str, last_eval: bool, buffers: bool, out: multiprocessing.Queue) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2, timeout=timedelta(seconds=3))
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(_Net(buffers))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        epochs = 3
        for epoch in range(epochs):
            for _ in range(2):
                opt.zero_grad()
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
            # rank 0 evaluates through the DDP model: every epoch but the last, or every epoch
            if rank == 0 and (last_eval or epoch < epochs - 1):
                with torch.no_grad():
                    model(torch.randn(4, 8))
        dist.barrier()   # the others' next collective once training is over
        out.put((rank, "ok"))
    except RuntimeError as e:
        # (a rank whose peer timed out first and left sees gloo's "Connection closed by peer" instead: the same wait)
        out.put((rank, "timeout" if "imed out" in str(e) else "peer left" if "closed by peer" in str(e) else str(e)[:200]))
    finally:
        dist.destroy_process_group()


def _run(tmp_path: Path, last_eval: bool, buffers: bool) -> dict[int, str]:
    return run_two_ranks(_rank, tmp_path, f"{last_eval:d}-{buffers:d}", last_eval, buffers)


@pytest.mark.timeout(120)
def test_a_rank0_forward_of_the_ddp_model_hangs_only_after_the_last_step(tmp_path: Path) -> None:
    # mid-training: rank 0's extra forward pairs with the others' next training forward, and the run completes
    assert _run(tmp_path, last_eval=False, buffers=True) == {0: "ok", 1: "ok"}
    # after the last step nobody joins its buffer broadcast: both wait (rank 0 in the broadcast, the others in the
    # barrier that it meets instead) until a timeout; whichever rank's 3 s run out first leaves, and the other may
    # learn of it as gloo's "Connection closed by peer" (rank 0 did so in a fresh-clone CI run of 046d473)
    hung = _run(tmp_path, last_eval=True, buffers=True)
    assert "timeout" in hung.values() and set(hung.values()) <= {"timeout", "peer left"}, hung
    # a model without buffers broadcasts nothing in its forward
    assert _run(tmp_path, last_eval=True, buffers=False) == {0: "ok", 1: "ok"}
