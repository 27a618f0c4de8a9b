"""Watchdog that kills a cluster's controller and engines when the process that started it dies.

ipyparallel starts the controller and each engine in a session of its own
(``start_new_session=True``), so they survive their parent: a Jupyter kernel killed before its
stop cell would leave 4 engines (~300 MiB each) and a controller running. ipyparallel's own
``atexit`` cleanup does not run on SIGKILL. :class:`RankCluster` therefore starts this small
process, also in its own session, which polls the owner's pid and, once it is gone, kills every
process whose environment carries the cluster's ``IPP_CLUSTER_ID`` and ``IPP_PROFILE_DIR`` (the
controller, its schedulers, the engines, their nannies, replacement engines alike), then exits.
A normal ``RankCluster.stop()`` terminates the reaper itself. For engines started as a Slurm job
(which may run on other hosts) it first runs ``scancel --name JOB_NAME``.

Usage: ``python -m nccl_workbook._reaper OWNER_PID OWNER_CREATE_TIME CLUSTER_ID PROFILE_DIR [scancel-name=JOB_NAME]``
"""

from __future__ import annotations

import os
import signal
import sys
import time

import psutil

__all__ = ["cluster_processes", "kill_cluster_processes", "remove_cluster_files", "main"]

POLL_S = 0.5


def cluster_processes(cluster_id: str, profile_dir: str) -> list[psutil.Process]:
    """Processes started for this cluster (matched by the environment ipyparallel gives them)."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("IPP_CLUSTER_ID") == cluster_id and env.get("IPP_PROFILE_DIR") == profile_dir:
            found.append(proc)
    return found


def kill_cluster_processes(cluster_id: str, profile_dir: str, *, timeout_s: float = 3.0) -> int:
    """SIGKILL every process of the cluster; returns how many were found."""
    procs = cluster_processes(cluster_id, profile_dir)
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)
    return len(procs)


def cancel_slurm_jobs(job_name: str) -> None:
    """``scancel`` this user's jobs of that name (the name holds the cluster id: nobody else's)."""
    import getpass
    import shutil
    import subprocess

    if shutil.which("scancel") is None:
        return
    try:
        subprocess.run(["scancel", "--name", job_name, "--user", getpass.getuser()],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        pass


def _owner_alive(pid: int, create_time: float) -> bool:
    try:
        p = psutil.Process(pid)
        # a recycled pid is another process: compare start times
        return abs(p.create_time() - create_time) < 1.0 and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (4, 5) or (len(args) == 5 and not args[4].startswith("scancel-name=")):
        print(__doc__, file=sys.stderr)
        return 2
    owner, create_time, cluster_id, profile_dir = int(args[0]), float(args[1]), args[2], args[3]
    job_name = args[4].split("=", 1)[1] if len(args) == 5 else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while _owner_alive(owner, create_time):
        time.sleep(POLL_S)
    if job_name:
        cancel_slurm_jobs(job_name)
    kill_cluster_processes(cluster_id, profile_dir)
    remove_cluster_files(cluster_id, profile_dir)
    return 0


def remove_cluster_files(cluster_id: str, profile_dir: str) -> None:
    """Remove the connection, cluster and log files of a cluster whose processes are gone, and
    its fork server's folder."""
    import shutil

    from nccl_workbook._zygote import zygote_dir

    shutil.rmtree(zygote_dir(cluster_id), ignore_errors=True)
    for sub in ("security", "log"):
        folder = os.path.join(profile_dir, sub)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if cluster_id in name:
                try:
                    os.remove(os.path.join(folder, name))
                except OSError:
                    pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
