"""Regenerate the init-rendezvous logs in this folder (scenario ``init-rendezvous-timeout``).

Four ranks, gloo, a 3 s init timeout; rank 2 sleeps 6 s ("prepares its shard") before
``init_process_group(timeout=3 s)`` (``env://``). Two cases, because who hosts the store changes
every message:

- ``gloo_init_late_rank_agent_store.log``: under ``torchrun --nproc_per_node 4 --tee 3`` (lines
  prefixed ``[default<rank>]:``), with torchrun's agent store (its default). torchrun stops the job
  at the first failed rank, so rank 2 (still sleeping) gets SIGTERM and prints no error of its own.
- ``gloo_init_late_rank_rank0_store.log``: four processes started by this script with
  ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` (rank 0 hosts the TCPStore: plain
  ``env://``, mpirun/srun without torchrun, and the workbook's cluster with ``tcp://``), each rank's
  output prefixed ``[rank<rank>]:`` here. Every rank, the late one included, prints its error.

Usage (about 25 s on 2 cores)::

    python tests/data/logs/torch213/make_init_logs.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_logs import _clean  # noqa: E402

SCRIPT = """
    import datetime, os, sys, time
    import torch.distributed as dist
    rank = int(os.environ["RANK"])
    if rank == 2:
        time.sleep(6.0)  # prepares its data shard before init, as many scripts do
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    dist.barrier()
    dist.destroy_process_group()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _write(name: str, how: str, codes: str, text: str) -> None:
    import torch

    header = (f"# source: generated locally with torch {torch.__version__} ({how}, gloo, 3 s init timeout, rank 2 "
              f"calls init_process_group 6 s late) by tests/data/logs/torch213/make_init_logs.py case {name!r}; "
              f"exit code {codes}\n")
    (HERE / f"{name}.log").write_text(header + _clean(text))
    print(name, codes)


def agent_store(script: Path) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "4", "--tee", "3",
           "--master_port", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script)]
    proc = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=120)
    _write("gloo_init_late_rank_agent_store", "torchrun --nproc_per_node 4 --tee 3, env://, torchrun's agent store",
           str(proc.returncode), proc.stdout + proc.stderr)


def rank0_store(script: Path) -> None:
    port = str(_free_port())
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                                       RANK=str(r), WORLD_SIZE="4"))
             for r in range(4)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    text = "".join(f"[rank{r}]:{line}\n" for r, out in enumerate(outs) for line in out.splitlines())
    _write("gloo_init_late_rank_rank0_store", "4 processes, env://, rank 0 hosts the store; lines prefixed [rankN]: "
           "by the generator", ",".join(str(p.returncode) for p in procs), text)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "late_init.py"
        script.write_text(textwrap.dedent(SCRIPT))
        agent_store(script)
        rank0_store(script)


if __name__ == "__main__":
    main()
