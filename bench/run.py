"""The workbook's benchmark table: one markdown table, measured in one run on the machine at hand.

    python bench/run.py [--repeats 3] [--skip-nbval] [--scenarios all|ID,ID]

Rows (each a median over repeats unless it says otherwise):

- cluster cold start to ready (engines up, torch imported, first group warmed), 2 and 4 ranks, and
  4 ranks without forking engines from the preloaded server (what it saves);
- replacing a dead engine (what a crash costs the next run);
- warm re-run overhead: wall time of a run on a started cluster minus the time the ranks spent in
  the program (group init + program + destroy are inside; dispatch and collection are the rest);
- tracer overhead: DDP step time traced / untraced on 4 ranks (ratio), and µs per traced collective;
- live progress publishing: DDP step time with / without it (ratio);
- wall time of every scenario variant (for broken runs: the overhead above the group timeout);
- live detection latency (rank0-work-before-barrier, 10 s timeout, rank 0 six seconds late);
- nbval over all notebooks (once: it is minutes);
- triage of 50 MiB of real error output and of a quiet log (``--triage-only``: just these rows).

Targets (issue 6) on a 2-core machine: tracer overhead < 3 % of step time, 4-rank cold start
< 12 s, warm re-run overhead < 1 s, whole nbval run < 5 minutes.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.programs import ddp_paired, ddp_steps, noop  # noqa: E402
from tests.dist.programs import die_on_rank  # noqa: E402  (the dist tests' crash program)
from nccl_workbook.cluster import RankCluster  # noqa: E402
from nccl_workbook.runner import run_scenario  # noqa: E402
from nccl_workbook.scenarios import SCENARIOS, get_scenario  # noqa: E402

ROWS: list[tuple[str, str, str]] = []


def row(what: str, value: str, target: str = "") -> None:
    ROWS.append((what, value, target))
    print(f"  {what}: {value}", file=sys.stderr, flush=True)


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def bench_cold_start(repeats: int) -> None:
    for n, fork in ((2, True), (4, True), (4, False)):
        times, phase_runs = [], []
        for _ in range(repeats):
            c = RankCluster(n_ranks=n, fork_engines=fork)
            t0 = time.perf_counter()
            c.start()
            times.append(time.perf_counter() - t0)
            phase_runs.append(dict(c.start_phases))
            c.stop()
        phases = {k: med([p[k] for p in phase_runs]) for k in phase_runs[0]}
        how = "engines forked from the preloaded server" if fork else "every engine its own interpreter (fork_engines=False)"
        row(f"cluster cold start to ready, {n} ranks, {how}",
            f"{med(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}; medians: "
            + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items()) + ")", "< 12 s" if n == 4 and fork else "")


def bench_replacement(cluster: RankCluster, repeats: int) -> None:
    """A rank's engine dies; time until a replacement engine is registered and set up."""
    times = []
    for _ in range(repeats):
        cluster.run(die_on_rank, 1, pg_timeout_s=3, live=False)
        t0 = time.perf_counter()
        notes = cluster.ensure_healthy()
        if any("replacement" in n for n in notes):
            times.append(time.perf_counter() - t0)
    how = "forked" if cluster.fork_engines else "not forked"
    value = f"{med(times):.1f} s (min {min(times):.1f}, max {max(times):.1f})" if times else "no engine was replaced"
    row(f"replace a dead engine (until registered and set up; engines {how})", value, "")


def bench_warm(cluster: RankCluster, repeats: int) -> None:
    overhead = []
    for _ in range(max(5, repeats)):
        run = cluster.run(noop, None, pg_timeout_s=5, live=False)
        inside = max((r.t_end_ns - r.t_begin_ns) / 1e9 for r in run.reports)
        overhead.append(run.wall_s)
        _ = inside
    row("warm re-run on a started cluster (whole run of an empty program: health ping, rendezvous, "
        "group init + destroy, collection)", f"{med(overhead) * 1e3:.0f} ms", "< 1 s")


def bench_tracer(cluster: RankCluster, repeats: int) -> None:
    """Traced / untraced from paired steps inside each run (``ddp_paired``); live publishing on /
    off from interleaved runs (it is per run). Ratios are medians over runs, with their range."""
    ratios, steps, live_ratios = [], [], []
    for _ in range(max(8, repeats)):
        run = cluster.run(ddp_paired, 60, pg_timeout_s=10, live=False, trace=True)
        p = med([float(r.metrics["plain_ms"]) for r in run.reports])
        ratios.append(med([float(r.metrics["traced_ms"]) for r in run.reports]) / p)
        steps.append(p)
    for _ in range(max(5, repeats)):
        traced = cluster.run(ddp_steps, (60, True), pg_timeout_s=10, live=False, trace=True)
        live = cluster.run(ddp_steps, (60, True), pg_timeout_s=10, live=True, trace=True)
        live_ratios.append(med([float(r.metrics["step_ms"]) for r in live.reports])
                           / med([float(r.metrics["step_ms"]) for r in traced.reports]))
    row("tracer: DDP step time traced / untraced (4 ranks, 3-layer MLP, 1 gradient bucket, alternating "
        "steps of two model copies in each run; traced = the gradient all-reduce goes through a Python "
        "comm hook and the tracer)",
        f"{med(ratios):.3f} (range {min(ratios):.2f}–{max(ratios):.2f}; untraced step {med(steps):.1f} ms)", "< 1.03")
    row("live progress publishing: step time with / without (interleaved runs)",
        f"{med(live_ratios):.3f} (range {min(live_ratios):.2f}–{max(live_ratios):.2f})", "")


def bench_scenarios(cluster: RankCluster, ids: list[str]) -> None:
    for sid in ids:
        s = get_scenario(sid)
        for v in s.variant_names:
            r = run_scenario(cluster, sid, v)
            extra = f" ({r.wall_s - r.pg_timeout_s:+.1f} s over the {r.pg_timeout_s:g} s timeout)" if not r.ok else ""
            row(f"scenario {sid} [{v}]", f"{r.wall_s:.1f} s, {r.outcome.value}{extra}")


def bench_detection(cluster: RankCluster, repeats: int) -> None:
    lat = []
    for _ in range(repeats):
        r = run_scenario(cluster, "rank0-work-before-barrier", "broken", timeout_s=10.0, seconds_per_sample=0.75)
        if r.hang is not None:
            lat.append(r.hang.detected_after_s)
    value = f"{med(lat):.2f} s after the others start waiting (timeout 10 s, rank 0 six seconds late)" if lat else "not detected"
    row("live detection latency", value, "< 3 s")


def bench_nbval() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NCCL_WORKBOOK_SHARED_CLUSTER"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "notebooks", "--nbval-lax", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
         "-q", "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, env=env,
    )
    wall = time.perf_counter() - t0
    tail = (proc.stdout.strip().splitlines() or ["?"])[-1]
    row("nbval over all notebooks (one shared cluster)", f"{wall:.0f} s ({tail})", "< 300 s")


def bench_triage() -> None:
    """50 MiB logs through triage_log (bench/triage_speed.py has the details and a profiler)."""
    from bench.triage_speed import error_log, quiet_log
    from nccl_workbook.triage import triage_log

    for name, data in (("real error output", error_log(50 * 2**20)), ("a quiet log", quiet_log(50 * 2**20))):
        start, cpu = time.perf_counter(), time.process_time()
        report = triage_log(data)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        row(f"triage of 50 MiB of {name} ({report.summary.n_events} events counted, "
            f"{report.summary.n_events_kept} kept)", f"{wall:.1f} s ({cpu:.1f} s CPU)", "< 5 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-nbval", action="store_true")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--scenarios", default="all", help="'all', 'none' or comma-separated ids")
    ap.add_argument("--triage-only", action="store_true", help="only the triage rows (no cluster)")
    args = ap.parse_args()
    os.environ.pop("NCCL_WORKBOOK_SHARED_CLUSTER", None)
    ids = list(SCENARIOS) if args.scenarios == "all" else [] if args.scenarios == "none" else args.scenarios.split(",")
    t0 = time.perf_counter()
    bench_triage()
    if args.triage_only:
        args.skip_cold = args.skip_nbval = True
        ids = []
    if not args.skip_cold:
        bench_cold_start(args.repeats)
    if not args.triage_only:
        with RankCluster(n_ranks=4) as cluster:
            bench_warm(cluster, args.repeats)
            bench_replacement(cluster, args.repeats)
            bench_tracer(cluster, args.repeats)
            bench_detection(cluster, args.repeats)
            bench_scenarios(cluster, ids)
    if not args.skip_nbval:
        bench_nbval()
    load = os.getloadavg()
    print(f"\nMachine: {platform.node()}, {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
          f"load average at the end {load[0]:.1f}; bench took {time.perf_counter() - t0:.0f} s; repeats={args.repeats}\n")
    print("| what | measured | target |")
    print("|---|---|---|")
    for what, value, target in ROWS:
        print(f"| {what} | {value} | {target} |")


if __name__ == "__main__":
    main()
