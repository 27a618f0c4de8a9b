"""Tracer overhead per collective: µs added to one ``all_reduce`` / ``barrier`` call.

Runs in one process on a 1-rank gloo group (no network wait, so the collective itself is as cheap
as it gets and the tracer's share is as large as it gets: an upper bound). Prints a markdown table.

    python bench/tracer_overhead.py [--calls 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch.distributed as dist

from nccl_workbook.trace import Tracer


def _per_call_us(fn, calls: int) -> float:  # noqa: ANN001
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - t0) / calls / 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    small, big = torch.ones(1), torch.ones(1 << 20)
    cases = {
        "all_reduce, 1 float": lambda: dist.all_reduce(small),
        "all_reduce, 4 MiB": lambda: dist.all_reduce(big),
        "barrier": lambda: dist.barrier(),
    }
    rows = []
    for name, fn in cases.items():
        calls = args.calls if "MiB" not in name else max(200, args.calls // 50)
        _per_call_us(fn, calls // 10)  # warm up
        plain, traced = [], []
        for _ in range(args.repeats):
            plain.append(_per_call_us(fn, calls))
            tracer = Tracer(rank=0)
            with tracer.installed():
                traced.append(_per_call_us(fn, calls))
        p, t = statistics.median(plain), statistics.median(traced)
        rows.append((name, p, t, t - p))
    dist.destroy_process_group()
    print(f"machine: {platform.node()} · {platform.processor() or platform.machine()} · torch {torch.__version__} · "
          f"median of {args.repeats} repeats\n")
    print("| call | untraced (µs) | traced (µs) | overhead per call (µs) |")
    print("|---|---:|---:|---:|")
    for name, p, t, d in rows:
        print(f"| {name} | {p:.1f} | {t:.1f} | {d:+.1f} |")


if __name__ == "__main__":
    main()
