"""Time to a ready 4-rank cluster: local engines (forked, and as separate interpreters) vs engines a
real single-node Slurm started (tests/slurm/daemons.py), interleaved on the same machine.

    python -m tests.slurm.time_to_ready [ROUNDS]      # as root, with Slurm installed
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import statistics
import sys
import tempfile

if "NCCL_WORKBOOK_HOME" not in os.environ:  # a state folder of its own, removed at exit
    os.environ["NCCL_WORKBOOK_HOME"] = tempfile.mkdtemp(prefix="nwb-time-to-ready-")
    atexit.register(shutil.rmtree, os.environ["NCCL_WORKBOOK_HOME"], ignore_errors=True)

from nccl_workbook.cluster import RankCluster  # noqa: E402
from nccl_workbook.launchers import SlurmEngines  # noqa: E402
from tests.slurm.daemons import Node, SlurmDaemons  # noqa: E402


def main(rounds: int = 3) -> None:
    daemons = SlurmDaemons([Node(socket.gethostname(), "127.0.0.1")])
    try:
        daemons.start()
        os.environ.update(daemons.env)
        print(f"Slurm daemons up in {daemons.start_s:.1f} s")
        kinds = {
            "local (forked engines)": lambda: RankCluster(n_ranks=4),
            "local (separate interpreters)": lambda: RankCluster(n_ranks=4, fork_engines=False),
            "slurm (sbatch + srun)": lambda: RankCluster(n_ranks=4, engines=SlurmEngines(partition="debug")),
        }
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for i in range(rounds):
            for name, make in kinds.items():
                cluster = make().start()
                try:
                    times[name].append(cluster.start_s or float("nan"))
                    print(f"round {i}: {name}: {cluster.start_s:.1f} s {cluster.start_phases}", flush=True)
                finally:
                    cluster.stop()
        for name, ts in times.items():
            print(f"{name}: median {statistics.median(ts):.1f} s, runs {', '.join(f'{t:.1f}' for t in ts)}")
    finally:
        daemons.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
