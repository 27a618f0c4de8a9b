"""Run ``watchdog_child.py`` under each NCCL error-handling setting and keep what happened.

For each mode in :data:`MODES` one 1-rank NCCL process runs with that environment; its combined
stdout/stderr goes to ``<out>/<mode>.log`` and its flight-recorder dumps to ``<out>/<mode>/``.
``<out>/summary.json`` holds, per mode: the environment, exit code, wall time, the marker lines and
the dump files. ``duplicate_gpu`` runs two ranks on the one GPU under torchrun (what NCCL says).

The tests in ``test_nccl_watchdog.py`` call :func:`capture`; one capture from a GPU machine is kept
as test data in ``tests/data/logs/nccl_gpu`` (its README says how it was made).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 2.0
SLEEP_S = 6.0
#: every mode but ``default`` and ``aeh3_nodump`` records the flight recorder, dumps it on a timeout
#: and shortens the watchdog's wait after a timeout: it sleeps 4 x TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC
#: (default 15 s: a minute) before it acts, measured here
RECORD = {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "1000"}
MODES: dict[str, dict[str, str]] = {
    "default": {},  # nothing set: what a job gets out of the box (dumps, if any, still land in <out>)
    "aeh3_nodump": {"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"},  # the default, without the dump
    "aeh0": {**RECORD, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"},
    "aeh1": {**RECORD, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
    "aeh2": {**RECORD, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"},
    "aeh3": {**RECORD, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"},
    "aeh3_timing": {**RECORD, "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "TORCH_NCCL_ENABLE_TIMING": "1"},
    "blocking_aeh3": {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"},
    "blocking_aeh2": {"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "2"},
}
#: how long each mode may take: the modes with the default wait need more than a minute
DEADLINE_S = {"default": 110.0, "aeh3_nodump": 110.0}
_MARK = re.compile(r"^@@ (\w+) t=([\d.]+) ?(.*)$")
_SCRUB = ("TORCH_NCCL_", "TORCH_FR_", "NCCL_", "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_mode(mode: str, out: Path, *, deadline_s: float | None = None) -> dict:
    folder = out / mode
    folder.mkdir(parents=True, exist_ok=True)
    env = {**_base_env(), **MODES[mode], "TORCH_FR_DUMP_TEMP_FILE": f"{folder}/nccl_trace_rank_",
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{folder}/nccl_trace_rank_"}
    cmd = [sys.executable, str(HERE / "watchdog_child.py"), "--port", str(free_port()), "--timeout-s", str(TIMEOUT_S),
           "--sleep-s", str(SLEEP_S), "--out", str(folder)]
    deadline_s = deadline_s or DEADLINE_S.get(mode, 60.0)
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=deadline_s)
        rc, text = p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        rc, text = None, (e.stdout or b"").decode(errors="replace") + f"\n@@ killed_by_parent t={deadline_s}\n"
    wall, ended = time.monotonic() - t, time.time()
    (out / f"{mode}.log").write_text(text)
    marks: dict[str, tuple[float, str]] = {}
    for line in text.splitlines():
        if m := _MARK.match(line):
            marks.setdefault(m.group(1), (float(m.group(2)), m.group(3)))
    files = {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}
    enq = re.search(r"epoch=([\d.]+)", marks.get("enqueued", (0, ""))[1])
    #: seconds from the stalled all-reduce's enqueue to the end of the process
    lived = round(ended - float(enq.group(1)), 2) if enq else None
    return {"mode": mode, "env": MODES[mode], "rc": rc, "wall_s": round(wall, 2), "ended_after_s": lived,
            "marks": marks, "files": files}


DUPLICATE = """
import os, datetime, torch, torch.distributed as dist
rank = int(os.environ["RANK"])
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=20), device_id=torch.device("cuda", 0))
x = torch.ones(4, device="cuda:0")
dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {rank}: all_reduce gave {x[0].item()}", flush=True)
dist.destroy_process_group()
"""


def run_duplicate_gpu(out: Path, *, deadline_s: float = 60.0) -> dict:
    """Two ranks on GPU 0 under torchrun: NCCL's answer to a duplicate GPU."""
    script = out / "duplicate_gpu.py"
    script.write_text(DUPLICATE)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
           str(script)]
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=_base_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=deadline_s,
                           cwd=out)
        rc, text = p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        rc, text = None, (e.stdout or b"").decode(errors="replace") + "\n[killed by the parent at its deadline]\n"
    (out / "duplicate_gpu.log").write_text(text)
    return {"mode": "duplicate_gpu", "rc": rc, "wall_s": round(time.monotonic() - t, 2)}


def capture(out: Path, *, modes: list[str] | None = None, workers: int = 10) -> dict[str, dict]:
    out.mkdir(parents=True, exist_ok=True)
    names = list(modes or MODES)
    with ThreadPoolExecutor(workers) as pool:
        futures = {m: pool.submit(run_mode, m, out) for m in names}
        dup = pool.submit(run_duplicate_gpu, out)
        results = {m: f.result() for m, f in futures.items()}
        results["duplicate_gpu"] = dup.result()
    import torch

    meta = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "timeout_s": TIMEOUT_S, "sleep_s": SLEEP_S}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "runs": results}, indent=1))
    return results


if __name__ == "__main__":
    res = capture(Path(sys.argv[1]))
    for m, r in res.items():
        print(f"{m:14s} rc={r['rc']} wall={r['wall_s']}s marks={list(r.get('marks', {}))} files={r.get('files')}")
