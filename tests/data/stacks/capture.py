"""Re-capture the py-spy dumps in this folder from real torchrun jobs (4 ranks, gloo on CPU).

    cd <repo> && python tests/data/stacks/capture.py [CASE ...]

Each case starts ``nccl_workbook/examples/train_ddp.py`` (or ``collectives.py`` beside this file)
under torchrun with a planted fault, waits until the job hangs, and saves every rank's
``py-spy dump --full-filenames --pid PID`` as ``CASE/rankR.txt`` (and with ``--native`` as
``CASE/rankR.native.txt`` where the case asks for it). Run as root (py-spy reads other
processes with ptrace). The unit tests read these files; they never run py-spy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository root: its nccl_workbook and tests

from nccl_workbook.examples import TRAIN_DDP  # noqa: E402
from tests._torchrun import torchrun_job  # noqa: E402
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))

#: case -> (script, args, line to wait for, extra seconds to wait, native too, samples)
CASES: dict[str, tuple[Path, tuple[str, ...], str, float, bool, int]] = {
    "stall-data": (TRAIN_DDP, ("--fault", "stall-data", "--fault-rank", "1", "--stall-s", "30",
                               "--pg-timeout-s", "60"), "step 5:", 2.0, True, 1),
    "stall-data-workers": (TRAIN_DDP, ("--fault", "stall-data", "--fault-rank", "2", "--stall-s", "30",
                                       "--num-workers", "2", "--pg-timeout-s", "60"), "step 5:", 3.0, True, 1),
    "rank0-eval": (TRAIN_DDP, ("--fault", "rank0-eval", "--stall-s", "30", "--pg-timeout-s", "60"),
                   "step 5:", 2.0, True, 2),
    "healthy": (TRAIN_DDP, ("--steps", "100000", "--step-sleep-s", "0.01", "--log-interval", "50",
                            "--eval-interval", "100000"), "step 50:", 1.0, True, 2),
    "skip-step": (TRAIN_DDP, ("--fault", "skip-step", "--fault-rank", "3", "--steps", "20",
                              "--pg-timeout-s", "30"), "step 15:", 1.5, True, 1),
    "collectives": (HERE / "collectives.py", ("--late-rank", "2", "--late-s", "30"), "entering", 2.0, True, 1),
}


def dump(pid: int, native: bool) -> str:
    cmd = [PY_SPY, "dump", "--full-filenames", "--pid", str(pid)] + (["--native"] if native else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    return out.stdout if out.returncode == 0 else f"(py-spy failed: {out.stderr.strip()})\n"


def capture(case: str) -> None:
    script, args, line, settle_s, native, samples = CASES[case]
    folder = HERE / case
    folder.mkdir(exist_ok=True)
    with torchrun_job(script, *args, "--out-dir", "/tmp/capture-ckpt", nproc=4, deadline_s=90) as job:
        pids = job.rank_pids(4)
        job.wait_for(line, timeout_s=60)
        time.sleep(settle_s)
        for i in range(samples):
            suffix = "" if samples == 1 else f".{i}"
            for rank, pid in pids.items():
                (folder / f"rank{rank}{suffix}.txt").write_text(dump(pid, False))
                if native:
                    (folder / f"rank{rank}{suffix}.native.txt").write_text(dump(pid, True))
            time.sleep(0.5)
        (folder / "job-output.txt").write_text(job.output())
    print(f"{case}: {sorted(p.name for p in folder.iterdir())}")


if __name__ == "__main__":
    for c in sys.argv[1:] or CASES:
        capture(c)
