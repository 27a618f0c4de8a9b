"""What ``nccl-workbook watch`` costs a real job, and how soon it names a late rank.

    python bench/watch_overhead.py [--pairs 5] [--nproc 2] [--steps 60] [--step-sleep-s 0.05]

- **Overhead**: the example training script (``nccl_workbook/examples/train_ddp.py``, DDP on gloo)
  under ``torchrun``, watched and not watched, in interleaved pairs (watched first in odd pairs,
  second in even ones) so that the machine's drift hits both alike. The step time is the script's
  own ("done: N steps in T s"), so launcher and watch start-up are not counted. Reported: the median
  over pairs of watched / unwatched, with the range. ``--step-sleep-s`` stands in for a model whose
  step takes that long (a real job's step is rarely under 50 ms); with 0 the tiny model's ~5 ms steps
  show the fixed cost per step (the Python comm hook for DDP's gradient all-reduce, ~0.3 ms).
- **Detection latency**: rank 0 evaluates for 3 s while the others wait in DDP's all-reduce; the
  seconds from the first rank waiting to ``watch`` naming rank 0 (``detected_after_s``).

Prints one markdown table. Times on a shared machine are noisy: read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nccl_workbook.examples import train_ddp  # noqa: E402

SCRIPT = Path(train_ddp.__file__)
DONE = re.compile(r"done: (\d+) steps in ([\d.]+) s")


def _torchrun(nproc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(SCRIPT), *args]


def step_s(cmd: list[str]) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    m = DONE.search(out.stdout + out.stderr)
    if out.returncode != 0 or m is None:
        raise RuntimeError(f"run failed ({out.returncode}): {(out.stdout + out.stderr)[-1500:]}")
    return float(m.group(2)) / int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--step-sleep-s", type=float, nargs="+", default=[0.05, 0.0])
    a = ap.parse_args()
    watch = [sys.executable, "-m", "nccl_workbook.cli", "watch", "--quiet", "--"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for sleep in a.step_sleep_s:
            args = ("--steps", str(a.steps), "--eval-interval", str(10 * a.steps), "--step-sleep-s", str(sleep),
                    "--out-dir", tmp)
            ratios, plain_s, watched_s = [], [], []
            for i in range(a.pairs):
                order = [False, True] if i % 2 else [True, False]
                got = {w: step_s((watch if w else []) + _torchrun(a.nproc, *args)) for w in order}
                plain_s.append(got[False])
                watched_s.append(got[True])
                ratios.append(got[True] / got[False])
            rows.append((f"step time watched / not watched, {a.nproc} ranks, step ≈ {sleep * 1e3:g} ms + tiny model "
                         f"({statistics.median(plain_s) * 1e3:.1f} ms unwatched)",
                         f"{statistics.median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}, {a.pairs} pairs)"))
        latencies = []
        for _ in range(3):
            out = Path(tmp) / "r.json"
            subprocess.run(watch[:-1] + ["--json", str(out), "--"]
                           + _torchrun(a.nproc, "--steps", "12", "--fault", "rank0-eval", "--stall-s", "3",
                                       "--eval-interval", "6", "--out-dir", tmp),
                           capture_output=True, timeout=300, cwd=ROOT)
            stalls = json.loads(out.read_text())["stalls"]
            latencies += [s["detected_after_s"] for s in stalls if s["culprit_ranks"] == [0]]
        rows.append(("detection latency: rank 0's 3 s evaluation named after (s)",
                     f"{statistics.median(latencies):.2f} ({min(latencies):.2f}–{max(latencies):.2f}, {len(latencies)} runs)"
                     if latencies else "not detected"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}")
    print("| what | measured |\n|---|---|")
    for what, value in rows:
        print(f"| {what} | {value} |")


if __name__ == "__main__":
    main()
