"""Rank programs for the GPU tests (module level: pickled by reference to the engines)."""

from __future__ import annotations

import logging
from typing import Any


def keep_gpu_busy(seconds: float) -> float:
    """Enqueue one kernel that spins for about ``seconds`` on the current stream (returns at once);
    returns the measured clock (Hz). Other processes on the GPU stretch a measurement, never shorten
    it: the fastest of three is kept, and at least 1.5 GHz assumed, so the kernel never ends early."""
    import torch

    rates = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        end.synchronize()
        rates.append(20_000_000 / (start.elapsed_time(end) / 1e3))
    torch.cuda._sleep(int(max(*rates, 1.5e9) * seconds))
    return max(rates)


def cuda_facts(ctx: Any, params: Any) -> dict[str, Any]:
    """What a (forked) engine sees of CUDA, and a matmul on its GPU."""
    import os

    import torch

    import torch.distributed as dist

    a = torch.randn(512, 512, device=ctx.device)
    ok = bool(torch.allclose((a @ torch.eye(512, device=ctx.device)).cpu(), a.cpu()))
    with open("/proc/self/maps") as f:
        device_files = "/dev/nvidia" in f.read()  # a CUDA context maps the driver's device files
    backend = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cuda"))
    return {"device": str(ctx.device), "initialized": torch.cuda.is_initialized(), "matmul_ok": ok,
            "name": torch.cuda.get_device_name(ctx.device), "pid": os.getpid(), "ppid": os.getppid(),
            "backend": ctx.backend, "maps_device_files": device_files,
            "backend_error_api": ",".join(n for n in dir(backend) if "err" in n.lower() or "abort" in n.lower())}


def stalled_allreduce(ctx: Any, params: float) -> dict[str, Any]:
    """A traced all-reduce queued behind a kernel that runs ``params`` seconds: with a shorter group
    timeout, NCCL's watchdog times it out (a 1-rank stand-in for a peer that never arrives)."""
    import torch
    import torch.distributed as dist

    import os
    import time

    x = torch.ones(1024, device=ctx.device)
    dist.all_reduce(x)  # one that finishes
    torch.cuda.synchronize()
    keep_gpu_busy(params)
    t = time.monotonic()
    dist.all_reduce(x)
    call_s = time.monotonic() - t
    torch.cuda.synchronize()
    return {"finished": True, "call_s": call_s, "sync_s": time.monotonic() - t,
            "blocking_wait_env": os.environ.get("TORCH_NCCL_BLOCKING_WAIT"),
            "aeh_env": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING")}


def traced_steps(ctx: Any, params: int) -> dict[str, Any]:
    """``params`` traced steps of all-reduces on CUDA tensors of a few sizes and dtypes."""
    import torch
    import torch.distributed as dist

    for i in range(params):
        with ctx.tracer.step(i):
            for numel, dtype in ((4, torch.float32), (1 << 20, torch.bfloat16)):
                dist.all_reduce(torch.ones(numel, dtype=dtype, device=ctx.device))
            dist.barrier()
    torch.cuda.synchronize()
    return {}


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


#: checks that stall the GPU past the group's timeout or tear the group down: one run each, so that a
#: failure (which aborts the communicator) cannot spill into the other checks
RISKY = ("wait_with_timeout", "prepare_after_init", "set_group_timeout", "FailFast(failure)")


def every_fix_on_cuda(ctx: Any, params: tuple[str, ...] | None) -> dict[str, Any]:
    """Each fix of ``nccl_workbook.fixes`` that touches tensors or a process group, on this rank's GPU
    in a 1-rank NCCL group. Returns ``{fix: True}`` or ``{fix: "what went wrong"}``. ``params``: the
    names of :data:`RISKY` checks to run, or None for every other check."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    from nccl_workbook import fixes as F

    dev = ctx.device
    out: dict[str, Any] = {}

    def check(name: str, fn: Any) -> None:
        if (name in RISKY) if params is None else (name not in params):
            return
        try:
            r = fn()
            out[name] = True if r is True else f"returned {r!r}"
        except Exception as e:  # noqa: BLE001 - each fix's failure is a result
            out[name] = f"{type(e).__name__}: {e}"[:300]

    check("any_rank", lambda: F.any_rank(True) is True and F.any_rank(False) is False)
    check("all_ranks", lambda: F.all_ranks(True) is True and F.all_ranks(False) is False)
    check("max_across_ranks", lambda: F.max_across_ranks(7) == 7)
    check("pad_to", lambda: (lambda t: t.device.type == "cuda" and t.tolist() == [3, 1, 0, 0])(
        F.pad_to(torch.tensor([3, 1], device=dev), 4)))
    check("check_same", lambda: F.check_same((3, 4), "shape") is None)
    check("detail_group", lambda: (lambda g: dist.all_reduce(torch.ones(1, device=dev), group=g) is None)(F.detail_group()))

    def uneven() -> bool:
        gather = F.UnevenAllGather((2, 3))
        with Join([gather]):
            for i in range(3):
                gather(torch.tensor([[i, 1, 2], [i + 10, 1, 2]], device=dev))
        rows = F.unique_by_index(torch.cat(gather.gathered))
        return gather.device.type == "cuda" and rows.device.type == "cuda" and rows[:, 0].tolist() == [0, 1, 2, 10, 11, 12]

    check("UnevenAllGather+unique_by_index", uneven)
    side = F.new_side_group(10.0)
    check("new_side_group+wait_for_main", lambda: F.wait_for_main(lambda: 42, group=side) == 42)
    check("sharded", lambda: F.sharded(lambda i: i * i, 5) == [0, 1, 4, 9, 16])
    check("group_timeout_s", lambda: abs(F.group_timeout_s() - ctx.pg_timeout_s) < 1e-3)

    def per_call_timeout(fix: Any) -> bool:
        # the group's timeout is short (ctx.pg_timeout_s); the barrier's own timeout is longer than the
        # kernel it waits behind: the barrier must not time out
        keep_gpu_busy(ctx.pg_timeout_s * 2)
        r = fix(lambda: 5, timeout_s=ctx.pg_timeout_s * 6)
        torch.cuda.synchronize()
        return r == 5

    check("wait_with_timeout", lambda: per_call_timeout(F.wait_with_timeout))
    check("prepare_after_init", lambda: per_call_timeout(F.prepare_after_init))

    def longer_group_timeout() -> bool:
        old = F.group_timeout_s()
        got = F.set_group_timeout(old * 6)
        keep_gpu_busy(old * 2)  # longer than the old timeout, shorter than the new one
        dist.all_reduce(torch.ones(4, device=dev))
        torch.cuda.synchronize()
        F.set_group_timeout(old)
        return abs(got - old * 6) < 1e-3 and abs(F.group_timeout_s() - old) < 1e-3

    check("set_group_timeout", longer_group_timeout)

    def norms() -> bool:
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(dev)
        model(torch.randn(8, 64, device=dev)).sum().backward()
        g, p = F.total_norms(model.parameters())
        ref = torch.nn.utils.get_total_norm([q.grad for q in model.parameters()])
        return g.device.type == "cuda" and p.device.type == "cuda" and bool(torch.allclose(g, ref))

    check("total_norms", norms)

    def background_logger() -> bool:
        seen: list[float] = []
        with F.BackgroundLogger(lambda r: seen.append(float(r["loss"]))) as bg:
            for i in range(3):
                bg.log({"loss": torch.tensor(float(i), device=dev)})  # .item() happens on the logger's thread
        return seen == [0.0, 1.0, 2.0] and not bg.errors

    check("BackgroundLogger", background_logger)

    def ddp_fixes() -> bool:
        class Two(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)

            def forward(self, x: Any) -> Any:
                return self.a(x).sum()  # self.b is unused

        model = Two().to(dev)
        ddp = DDP(model, device_ids=[dev.index])
        loss = ddp(torch.randn(4, 8, device=dev))
        unused = F.parameters_not_in_graph(loss, ddp.module)
        F.use_all_parameters(loss, ddp.module).backward()
        loss2 = F.use_all_parameters(ddp(torch.randn(4, 8, device=dev)), ddp.module)
        loss2.backward()  # a second step: no 'Expected to have finished reduction' error
        torch.cuda.synchronize()
        ok = sorted(unused) == ["b.bias", "b.weight"] and model.b.weight.grad is not None
        return ok or f"unused={unused} b.grad={'set' if model.b.weight.grad is not None else None}"

    check("parameters_not_in_graph+use_all_parameters", ddp_fixes)

    def failfast_ok() -> bool:
        with F.FailFast(name="ok") as ff:
            dist.all_reduce(torch.ones(4, device=dev))
        return ff.failure is None

    check("FailFast(success)", failfast_ok)

    def failfast_error() -> bool:
        handler = _Warnings()
        logging.getLogger("nccl_workbook").addHandler(handler)
        try:
            with F.FailFast(name="fail"):
                raise ValueError("bad sample")
        except ValueError:
            pass
        finally:
            logging.getLogger("nccl_workbook").removeHandler(handler)
        bad = [m for m in handler.records if "down failed" in m or "process group failed" in m]
        return not bad or f"warnings: {bad}"  # the NCCL abort path ran without an error

    # last: tears the group down (NCCL: abort), as it would after a real failure
    check("FailFast(failure)", failfast_error)
    return out
