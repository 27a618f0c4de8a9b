"""Start here: a cluster health check and a collective bandwidth sweep (nccl-tests style).

:func:`check` is what ``torch-distributed-gpu-test.py`` does, as a result value: every rank
initialises the group, an ``all_reduce`` (checked for the right sum) and a ``barrier`` succeed, and
each rank reports host, pid, device and versions (torch, backend; NCCL and CUDA where present). A
rank that fails is named; the whole check ends within its deadline, never hangs.

:func:`sweep` times ``all_reduce``, ``all_gather``, ``reduce_scatter`` and ``broadcast`` over
message sizes (4 B to 64 MiB by default) and reports, like nccl-tests:

- ``time_us``: per-iteration time, the median over iterations of the slowest rank,
- ``algbw_gbps`` = size / time, where size is the whole buffer (nccl-tests' convention: the
  output of all_gather, the input of reduce_scatter),
- ``busbw_gbps`` = algbw x factor, the bandwidth each link must carry, comparable across ops and
  rank counts: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n, broadcast 1.

Next to it, the same run measures this host's memory-copy bandwidth on every rank
(``host_copy_gbps``): on CPU no collective can beat a local copy, so busbw / host copy says how
close the backend gets. On GPUs the copy is device to device and times come from CUDA events.

Usage::

    report = check(cluster)              # HealthReport: .ok, .failed_ranks, .frame()
    bw = sweep(cluster)                  # SweepResult: .frame (one row per op and size), .host_copy_gbps
"""

from __future__ import annotations

import html
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from nccl_workbook.status import RankStatus

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.cluster import RankCluster

__all__ = ["check", "sweep", "HealthReport", "SweepResult", "BUSBW_FACTOR", "DEFAULT_SIZES", "default_sizes"]


def default_sizes(max_bytes: int = 64 * 2**20) -> tuple[int, ...]:
    """4 B, 16 B, … (x4) up to ``max_bytes``."""
    out, s = [], 4
    while s <= max_bytes:
        out.append(s)
        s *= 4
    return tuple(out)


DEFAULT_SIZES = default_sizes()
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")


def BUSBW_FACTOR(op: str, n: int) -> float:  # noqa: N802 - a formula, named like nccl-tests' table
    """nccl-tests' bus-bandwidth factor for ``op`` on ``n`` ranks."""
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "broadcast": 1.0}[op]


# -- health check -------------------------------------------------------------------------------
@dataclass(frozen=True)
class RankHealth:
    rank: int
    status: RankStatus
    host: str
    pid: int
    device: str
    torch: str
    backend: str
    nccl: str | None
    cuda: str | None
    allreduce_ok: bool
    error: str | None


@dataclass(frozen=True)
class HealthReport:
    ranks: tuple[RankHealth, ...]
    wall_s: float
    world_size: int

    @property
    def ok(self) -> bool:
        return all(r.status is RankStatus.OK and r.allreduce_ok for r in self.ranks)

    @property
    def failed_ranks(self) -> tuple[int, ...]:
        return tuple(r.rank for r in self.ranks if r.status is not RankStatus.OK or not r.allreduce_ok)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([{k: (v.value if isinstance(v, RankStatus) else v) for k, v in r.__dict__.items()}
                             for r in self.ranks]).set_index("rank")

    def summary(self) -> str:
        if self.ok:
            return f"all {self.world_size} ranks healthy: init, all_reduce (correct sum) and barrier in {self.wall_s:.1f} s"
        return f"unhealthy rank(s) {list(self.failed_ranks)}: " + "; ".join(
            f"rank {r.rank}: {r.status.value} {r.error or ('wrong all_reduce sum' if not r.allreduce_ok else '')}"
            for r in self.ranks if r.rank in self.failed_ranks)

    def _repr_html_(self) -> str:
        colour = "#2e7d32" if self.ok else "#c62828"
        return f"<p style='color:{colour}'><b>{html.escape(self.summary())}</b></p>" + self.frame().to_html()


def _check_program(ctx: Any, params: None) -> dict[str, Any]:
    import os
    import socket

    import torch
    import torch.distributed as dist

    t = torch.tensor([float(ctx.rank)], device=ctx.device)
    dist.all_reduce(t)
    expected = ctx.world_size * (ctx.world_size - 1) / 2
    dist.barrier()
    cuda = torch.version.cuda if torch.cuda.is_available() else None
    nccl = None
    if ctx.backend == "nccl":
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return {"host": socket.gethostname(), "pid": os.getpid(), "device": str(ctx.device), "torch": torch.__version__,
            "nccl": nccl, "cuda": cuda, "allreduce_ok": abs(float(t.item()) - expected) < 1e-6}


def check(cluster: RankCluster, *, world_size: int | None = None, timeout_s: float = 5.0) -> HealthReport:
    """Every rank initialises, all-reduces (checked) and meets at a barrier; see the module doc."""
    run = cluster.run(_check_program, None, pg_timeout_s=timeout_s, world_size=world_size,
                      deadline_s=3 * timeout_s + 20, live=False)
    ranks = []
    for rep in run.reports:
        m = rep.metrics
        ranks.append(RankHealth(
            rank=rep.rank, status=rep.status, host=str(m.get("host", rep.host)), pid=int(m.get("pid", rep.pid)),
            device=str(m.get("device", "?")), torch=str(m.get("torch", "?")), backend=run.backend,
            nccl=m.get("nccl"), cuda=m.get("cuda"), allreduce_ok=bool(m.get("allreduce_ok", False)), error=rep.error,
        ))
    return HealthReport(tuple(ranks), run.wall_s, run.world_size)


# -- bandwidth sweep ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepParams:
    sizes: tuple[int, ...] = DEFAULT_SIZES
    ops: tuple[str, ...] = OPS
    #: iterations per size: many for small messages, few for large ones (same on every rank)
    target_bytes_per_size: int = 256 * 2**20
    max_iters: int = 20
    min_iters: int = 3
    warmup: int = 1

    def iters(self, size: int) -> int:
        return max(self.min_iters, min(self.max_iters, self.target_bytes_per_size // max(size, 1)))


@dataclass(frozen=True)
class SweepResult:
    frame: pd.DataFrame
    host_copy_gbps: float
    world_size: int
    backend: str
    wall_s: float
    notes: tuple[str, ...] = field(default=())

    def table(self) -> pd.DataFrame:
        """The sweep as a reader scans it: one row per message size (``16 B``, ``1 KiB``…), per op
        the time per call (µs) and the bus bandwidth in MB/s (so tiny messages are not ``0.000``
        GB/s). Sizes some op could not run at (all_gather/reduce_scatter need one element per
        rank) are left out; the full numbers are in :attr:`frame`."""
        from nccl_workbook.plots import format_bytes

        f = self.frame.assign(busbw_mbps=self.frame["busbw_gbps"] * 1e3)
        wide = f.pivot(index="size_bytes", columns="op", values=["time_us", "busbw_mbps"]).dropna()
        wide = wide.rename(columns={"time_us": "time per call (µs)", "busbw_mbps": "bus bandwidth (MB/s)"}, level=0)
        wide.index = [format_bytes(b) for b in wide.index]
        wide.index.name = "message size"
        return wide.map(_readable)

    def latency_note(self, small_bytes: int = 4096) -> str:
        """One sentence computed from this sweep: how much the time per call of messages up to
        ``small_bytes`` varies, next to the largest message's, per op (what "small messages
        measure latency" looks like on this machine, today)."""
        from nccl_workbook.plots import format_bytes

        parts = []
        big = int(self.frame["size_bytes"].max())
        for op, g in self.frame.groupby("op", sort=False):
            small = g[g["size_bytes"] <= small_bytes]["time_us"].dropna()
            top = g[g["size_bytes"] == big]["time_us"].dropna()
            if len(small) and len(top):
                parts.append(f"{op} {small.min():.0f}–{small.max():.0f} µs up to {format_bytes(small_bytes)}, "
                             f"{float(top.iloc[0]) / 1e3:.0f} ms at {format_bytes(big)}")
        spread = max((self.frame[self.frame["size_bytes"] <= small_bytes].groupby("op")["time_us"]
                      .agg(lambda t: t.max() / max(t.min(), 1e-9))).tolist() or [1.0])
        flat = ("flat within 2x: the per-call cost, not the size, sets the time" if spread <= 2 else
                f"they vary up to {spread:.0f}x between sizes in this run; flat holds on a quiet machine only "
                "(other processes on the same cores add milliseconds at random)")
        return f"time per call in this run: {'; '.join(parts)}. Small messages: {flat}."


def _readable(x: float) -> str:
    """A number for a table: ``1234``, ``12.3``, ``0.0061`` (two significant digits below 1)."""
    if x != x:  # NaN
        return "–"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 1 else f"{x:.2g}"


def _timer(device: Any) -> tuple[Any, Any]:
    """(start, stop) callables giving seconds; CUDA events on a GPU, perf_counter on CPU."""
    import torch

    if device.type == "cuda":
        def start() -> Any:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e

        def stop(e: Any) -> float:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            return e.elapsed_time(end) / 1e3

        return start, stop
    return time.perf_counter, lambda t0: time.perf_counter() - t0


def _all_gather_single(out: Any, inp: Any) -> Any:
    """``dist.all_gather_single`` (torch 2.13), ``all_gather_into_tensor`` before it (2.11 has no other)."""
    import torch.distributed as dist

    return getattr(dist, "all_gather_single", dist.all_gather_into_tensor)(out, inp)


def _reduce_scatter_single(out: Any, inp: Any) -> Any:
    """``dist.reduce_scatter_single`` (torch 2.13), ``reduce_scatter_tensor`` before it."""
    import torch.distributed as dist

    return getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)(out, inp)


def _sweep_program(ctx: Any, p: SweepParams) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    n, dev = ctx.world_size, ctx.device
    start, stop = _timer(dev)
    out: dict[str, Any] = {}
    # host (or device) copy bandwidth: 64 MiB, read + write counted once as the copied size
    src = torch.ones(16 * 2**20, device=dev)
    dst = torch.empty_like(src)
    copies = []
    for _ in range(5):
        t0 = start()
        dst.copy_(src)
        copies.append(stop(t0))
    out["copy_gbps"] = src.numel() * 4 / statistics.median(copies) / 1e9
    del src, dst
    for op in p.ops:
        for size in p.sizes:
            numel = max(1, size // 4)
            if op in ("all_gather", "reduce_scatter"):
                if numel < n:
                    continue  # the whole buffer holds at least one float per rank
                numel -= numel % n  # whole buffer, divisible by the ranks
            chunk = numel // n
            if op == "all_reduce" or op == "broadcast":
                buf = torch.ones(numel, device=dev)
                call = (lambda: dist.all_reduce(buf)) if op == "all_reduce" else (lambda: dist.broadcast(buf, src=0))
            elif op == "all_gather":
                inp, outp = torch.ones(chunk, device=dev), torch.empty(chunk * n, device=dev)
                call = lambda: _all_gather_single(outp, inp)  # noqa: E731
            else:
                inp, outp = torch.ones(chunk * n, device=dev), torch.empty(chunk, device=dev)
                call = lambda: _reduce_scatter_single(outp, inp)  # noqa: E731
            for _ in range(p.warmup):
                call()
            times = []
            for _ in range(p.iters(size)):
                dist.barrier()
                t0 = start()
                call()
                times.append(stop(t0))
            out[f"{op}|{size}|{numel * 4}"] = statistics.median(times)
    return out


def sweep(cluster: RankCluster, *, world_size: int | None = None, sizes: tuple[int, ...] = DEFAULT_SIZES,
          ops: tuple[str, ...] = OPS, timeout_s: float = 60.0) -> SweepResult:
    """Latency and bandwidth of each op over ``sizes``; see the module docstring."""
    unknown = set(ops) - set(OPS)
    if unknown:
        raise ValueError(f"unknown op(s) {sorted(unknown)}; known: {', '.join(OPS)}")
    if not sizes or min(sizes) < 4:
        raise ValueError("sizes must be a non-empty list of byte counts >= 4")
    params = SweepParams(sizes=tuple(sizes), ops=tuple(ops))
    run = cluster.run(_sweep_program, params, pg_timeout_s=timeout_s, world_size=world_size,
                      deadline_s=10 * timeout_s, live=False, trace=False)
    bad = [r for r in run.reports if r.status is not RankStatus.OK]
    if bad:
        raise RuntimeError("the sweep failed on rank(s) " + ", ".join(f"{r.rank} ({r.error})" for r in bad))
    n = run.world_size
    rows = []
    for key in run.reports[0].metrics:
        if "|" not in key:
            continue
        op, size, nbytes = key.split("|")
        t = max(float(rep.metrics[key]) for rep in run.reports)  # the slowest rank sets the pace
        algbw = int(nbytes) / t / 1e9
        rows.append({"op": op, "size_bytes": int(size), "bytes": int(nbytes), "time_us": t * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": algbw * BUSBW_FACTOR(op, n)})
    copy = statistics.median(float(r.metrics["copy_gbps"]) for r in run.reports)
    return SweepResult(pd.DataFrame(rows), copy, n, run.backend, run.wall_s)
