"""How fast ``nccl-workbook triage`` reads big logs, and how much memory it takes.

    python bench/triage_speed.py [--mb 50] [--kind error|quiet|both] [--profile]
    /usr/bin/time -v python bench/triage_speed.py --kind error      # peak memory (Maximum resident set size)

Two inputs, built in memory:

- ``error``: the real error output of ``tests/data/logs`` (every excerpt from public threads and
  every torch 2.13 recording) repeated up to the size: almost every line matches something;
- ``quiet``: what a healthy job prints, NCCL INFO lines, progress bars, a trainer's logging, with
  one watchdog timeout every ~100 lines.

Each row is the time of ``triage_log`` (parse, summarise, rank causes) on bytes already in memory,
and the time to read the same bytes from a file for comparison (the floor).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_workbook.triage import triage_log  # noqa: E402

LOGS = ROOT / "tests" / "data" / "logs"

_QUIET = (
    "gpu-a100-07:4060:4193 [0] NCCL INFO Channel 03/0 : 0[90000] -> 1[1000] [send] via NET/Socket/3\n"
    "Epoch 3:  41%|####      | 410/1000 [06:28<09:20,  1.05it/s, loss=2.61, v_num=95nc]\n"
    "[rank2]:[W1121 10:00:01.123456789 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
    "using GPU 2 to perform barrier as devices used by this process are currently unknown.\n"
    "{'loss': 0.9225, 'learning_rate': 6.5e-06, 'epoch': 0.03}\n"
    '[default3]:  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1736, in _call\n'
    "INFO 2025-11-21 10:00:01,123 trainer.py:412 step=1200 throughput=5123.4 tokens/s\n"
) * 16 + (
    "[rank5]:[E1121 10:10:01.1 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 milliseconds "
    "before timing out.\n"
)


def error_log(size: int) -> bytes:
    """The real error excerpts of tests/data/logs, repeated to ``size`` bytes."""
    parts = [p.read_bytes().partition(b"\n")[2] for p in sorted(LOGS.glob("*/*.log"))]
    chunk = b"\n".join(parts) + b"\n"
    return (chunk * (size // len(chunk) + 1))[:size]


def quiet_log(size: int) -> bytes:
    chunk = _QUIET.encode()
    return (chunk * (size // len(chunk) + 1))[:size]


def measure(name: str, data: bytes, profile: bool, memory: bool) -> None:
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        start = time.perf_counter()
        Path(f.name).read_bytes()
        read_s = time.perf_counter() - start
    finally:
        os.unlink(f.name)
    profiler = cProfile.Profile() if profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    report = triage_log(data)
    if profiler is not None:
        profiler.disable()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    mib = len(data) / 2**20
    s = report.summary
    print(f"{name}: {mib:.0f} MiB in {elapsed:.2f} s, {cpu:.2f} s CPU ({mib / elapsed:.1f} MiB/s; reading the file: "
          f"{read_s:.2f} s); "
          f"{len(report.events)} events kept, summary counts {s.n_events} events on {len(s.ranks_seen)} ranks",
          flush=True)
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    if memory:
        tracemalloc.start()
        triage_log(data)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"  peak memory allocated by triage_log (tracemalloc, input not counted): {peak / 2**20:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--kind", choices=("error", "quiet", "both"), default="both")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--memory", action="store_true", help="also run once under tracemalloc (slower)")
    args = parser.parse_args()
    size = int(args.mb * 2**20)
    if args.kind in ("error", "both"):
        measure("error output", error_log(size), args.profile, args.memory)
    if args.kind in ("quiet", "both"):
        measure("quiet log", quiet_log(size), args.profile, args.memory)


if __name__ == "__main__":
    main()
