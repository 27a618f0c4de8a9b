"""Regenerate the torch 2.13 CPU (gloo) logs in this folder.

Each case runs a tiny rank program under ``torchrun`` (2 ranks unless ``NPROC`` says otherwise; or a single process)
with a 2 s process-group timeout and stores the combined stdout+stderr, with a header line that
says how it was made. The ``gloo_ctrl_c_*`` cases hang on purpose and are stopped with SIGINT to
torchrun, as Ctrl-C would. Usage (about 60 s on 2 cores)::

    python tests/data/logs/torch213/make_logs.py [CASE ...]

The stored logs are test data: the parser must extract the fields torch 2.13 really prints.
Host-specific paths in the output are replaced by ``<site-packages>`` / ``<tmp>`` to keep the
files stable and free of machine paths.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

PROGRAMS: dict[str, str] = {
    # rank 0 does 5 s of "work" before the barrier; rank 1 waits at it and times out after 2 s.
    "gloo_rank0_work_before_barrier": """
        import datetime, os, time
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
        rank = dist.get_rank()
        if rank == 0:
            time.sleep(5)  # e.g. writing a checkpoint or generating samples on rank 0 only
        dist.barrier()
        dist.destroy_process_group()
    """,
    # rank 1 is late; rank 0's monitored_barrier names it.
    "gloo_monitored_barrier": """
        import datetime, time
        import torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
        rank = dist.get_rank()
        if rank == 1:
            time.sleep(4)
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=2), wait_all_ranks=True)
        dist.destroy_process_group()
    """,
    # shapes differ across ranks; TORCH_DISTRIBUTED_DEBUG=DETAIL reports the mismatch.
    "gloo_detail_shape_mismatch": """
        import datetime
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
        rank = dist.get_rank()
        t = torch.ones(3 if rank == 0 else 4)
        dist.all_reduce(t)
        dist.destroy_process_group()
    """,
    # rank 1 raises before the all_reduce; rank 0 waits at it.
    "gloo_exception_on_one_rank": """
        import datetime, time
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
        rank = dist.get_rank()
        if rank == 1:
            raise ValueError("bad sample in batch 17")
        t = torch.ones(1)
        dist.all_reduce(t)
        dist.destroy_process_group()
    """,
    # rank 1 prepares its data for 8 s before init_process_group; rank 0 gives up after its 2 s init
    # timeout, waiting in gloo's set-up for rank 1's address in the store.
    "gloo_rank1_late_to_init": """
        import datetime, os, time
        import torch.distributed as dist
        if os.environ["RANK"] == "1":
            time.sleep(8)  # e.g. tokenising its data shard before init
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=2))
        dist.barrier()
        dist.destroy_process_group()
    """,
    # rank 3 has no evaluation batch left and skips the all_gather the others enter; it waits in the
    # barrier that follows (4 ranks).
    "gloo_rank3_skips_allgather": """
        import datetime
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
        rank = dist.get_rank()
        out = [torch.zeros(1) for _ in range(dist.get_world_size())]
        if rank != 3:
            dist.all_gather(out, torch.ones(1))  # evaluation: rank 3 has no batch left
        dist.barrier()
        dist.destroy_process_group()
    """,
    # rank 2 runs one step fewer than ranks 0 and 1 and leaves cleanly (exit code 0) while they
    # are in the next step's all_reduce (3 ranks).
    "gloo_rank2_finishes_early": """
        import datetime
        import torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
        rank = dist.get_rank()
        steps = 2 if rank == 2 else 3  # an uneven shard: one batch fewer on rank 2
        for step in range(steps):
            t = torch.ones(4)
            dist.all_reduce(t)
        dist.destroy_process_group()
    """,
    # Ctrl-C on a hung job: ranks 0-2 wait in all_reduce (60 s timeout), rank 3's dataset blocks on a read.
    # torchrun forwards the SIGINT; every rank prints where it was.
    "gloo_ctrl_c_rank3_in_dataloader": """
        import datetime, time
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, Dataset

        class Shard(Dataset):
            def __init__(self, rank): self.rank = rank
            def __len__(self): return 100
            def __getitem__(self, i):
                if self.rank == 3 and i >= 8:
                    time.sleep(120)  # a read from a stalled file system
                return torch.ones(4)

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank = dist.get_rank()
        for batch in DataLoader(Shard(rank), batch_size=4):
            dist.all_reduce(batch.sum().reshape(1))
        dist.destroy_process_group()
    """,
    # Ctrl-C on a hung job: rank 0 evaluates alone (its own code), ranks 1-3 wait in the next all_reduce.
    "gloo_ctrl_c_rank0_in_eval": """
        import datetime, time
        import torch, torch.distributed as dist

        def evaluate(model):
            for _ in range(1200):  # a long validation pass on rank 0 only
                time.sleep(0.1)

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        rank = dist.get_rank()
        for step in range(10):
            dist.all_reduce(torch.ones(1))
            if rank == 0 and step == 2:
                evaluate(None)
        dist.destroy_process_group()
    """,
}

#: ranks per torchrun case (default 2)
NPROC: dict[str, int] = {"gloo_rank3_skips_allgather": 4, "gloo_rank2_finishes_early": 3,
                         "gloo_ctrl_c_rank3_in_dataloader": 4, "gloo_ctrl_c_rank0_in_eval": 4}

SINGLE: dict[str, str] = {
    "dataloader_timeout": """
        import time, torch
        from torch.utils.data import DataLoader, Dataset
        class Slow(Dataset):
            def __len__(self): return 4
            def __getitem__(self, i):
                time.sleep(3)
                return torch.tensor(i)
        for batch in DataLoader(Slow(), num_workers=1, timeout=1):
            pass
    """,
    "store_waiting_for_clients": """
        import datetime
        import torch.distributed as dist
        dist.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=1))
    """,
    # rank 1 of 2 connects to a master port nobody listens on (the master never started, or a
    # wrong MASTER_PORT): the TCPStore client gives up after the 2 s timeout.
    "store_client_connect_timeout": """
        import datetime, socket
        import torch.distributed as dist
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                                timeout=datetime.timedelta(seconds=2))
    """,
    # the store based barrier that init_process_group runs with TORCH_DIST_INIT_BARRIER=1 (and
    # new_group): rank 0 of 2 arrives, rank 1 never does. torch logs progress every 10 s at debug
    # level, so this takes about 10 s.
    "store_based_barrier_timeout": """
        import datetime, logging
        import torch.distributed as dist
        from torch.distributed.distributed_c10d import _store_based_barrier
        logging.getLogger("torch.distributed.distributed_c10d").setLevel(logging.DEBUG)
        store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30))
        _store_based_barrier(0, store, "0", 2, datetime.timedelta(seconds=2))
    """,
    # a DataLoader worker gets SIGBUS, as it does when /dev/shm is too small for its batches
    "dataloader_worker_bus_error": """
        import os, signal, torch
        from torch.utils.data import DataLoader, Dataset
        class Shm(Dataset):
            def __len__(self): return 4
            def __getitem__(self, i):
                os.kill(os.getpid(), signal.SIGBUS)
                return torch.tensor(i)
        for batch in DataLoader(Shm(), num_workers=1, timeout=5):
            pass
    """,
}
#: cases stopped with SIGINT to torchrun (as Ctrl-C would) this many seconds after the start
INTERRUPT_AFTER_S = {"gloo_ctrl_c_rank3_in_dataloader": 10.0, "gloo_ctrl_c_rank0_in_eval": 10.0}


def _clean(text: str) -> str:
    text = re.sub(r"[^\s\"']*site-packages", "<site-packages>", text)
    text = re.sub(r"/tmp/[^\s\"']*", "<tmp>", text)
    text = re.sub(r"/work/[^\s\"']*", "<work>", text)
    return text


def _interrupted(cmd: list[str], env: dict[str, str], after_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``, send it SIGINT after ``after_s`` seconds, and collect what it printed."""
    with subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            out, _ = proc.communicate(timeout=after_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=90)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def _run(name: str, source: str, distributed: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / f"{name}.py"
        script.write_text(textwrap.dedent(source))
        env = dict(os.environ, OMP_NUM_THREADS="1")
        if name == "gloo_detail_shape_mismatch":
            env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        if distributed:
            nproc = NPROC.get(name, 2)
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                   "--master_port", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                   "127.0.0.1:0", str(script)]
            how = f"torchrun --nproc_per_node {nproc}, gloo, 2-3 s process-group timeout"
        else:
            cmd = [sys.executable, str(script)]
            how = "one process"
        proc = _interrupted(cmd, env, INTERRUPT_AFTER_S[name]) if name in INTERRUPT_AFTER_S else \
            subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        import torch

        header = (f"# source: generated locally with torch {torch.__version__} ({how}) by "
                  f"tests/data/logs/torch213/make_logs.py case {name!r}; exit code {proc.returncode}\n")
        (HERE / f"{name}.log").write_text(header + _clean(proc.stdout + proc.stderr))
        print(name, proc.returncode)


def main(names: list[str]) -> None:
    """Run every case, or only the ones named on the command line."""
    unknown = set(names) - set(PROGRAMS) - set(SINGLE)
    if unknown:
        raise SystemExit(f"unknown case(s) {sorted(unknown)}; known: {', '.join([*PROGRAMS, *SINGLE])}")
    for name, src in PROGRAMS.items():
        if not names or name in names:
            _run(name, src, distributed=True)
    for name, src in SINGLE.items():
        if not names or name in names:
            _run(name, src, distributed=False)


if __name__ == "__main__":
    main(sys.argv[1:])
