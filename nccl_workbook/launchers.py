"""Where a :class:`~nccl_workbook.cluster.RankCluster`'s engines come from: this host, a Slurm job, or mpiexec.

Each launch spec is a small frozen value handed to ``RankCluster(engines=...)``; it names one of
ipyparallel's own launchers and the options passed through to it, and knows how to check its
prerequisites before anything is started (so bad input is a :class:`ClusterError` with the reason,
never a cell that hangs):

- :class:`LocalEngines` (default): engines on this host (forked from the fork server).
- :class:`SlurmEngines`: one ``sbatch`` job whose ``srun`` starts one engine per task
  (ipyparallel's ``SlurmEngineSetLauncher`` with a batch script of ours: partition, time limit,
  nodes, tasks per node, GPUs per node, account). The controller stays on this host (the login
  node) and listens on an address the compute nodes reach. Stopping the cluster ``scancel``\\ s the
  job, and so does the reaper when the kernel dies.
- :class:`MPIEngines`: ``mpiexec -n N`` engines (ipyparallel's ``MPIEngineSetLauncher``).

Engines report where they run (:func:`engine_placement`: host, and the local rank and global
rank from ``SLURM_LOCALID``/``SLURM_PROCID`` or ``OMPI_COMM_WORLD_LOCAL_RANK``/``_RANK``); the
cluster orders ranks by (host, local rank), so rank ``r`` is the same engine whatever order the
engines registered in, and each rank's ``local_rank`` (its GPU index) is the launcher's.

Addresses: a cluster whose ranks all run on this host uses loopback. Otherwise the controller, the
rendezvous and the live-detection hub bind to :func:`host_address` (``$NCCL_WORKBOOK_HOST_ADDR``,
or this host's own address, never loopback), and rank 0 picks its rendezvous on the interface that
routes to that address (:func:`rendezvous_toward`).

Limits: engines must see the same file system as this host (the connection file and the venv's
Python are read from there), as on any Slurm site with shared home directories. GPUs are given
per node (``--gpus-per-node``), so every task sees all GPUs of its node and uses the one at its
local rank; a site that binds one GPU per task would need ``local_rank`` 0 on each.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ipyparallel.cluster.launcher import MPIEngineSetLauncher, SlurmEngineSetLauncher

__all__ = [
    "ClusterError", "LocalEngines", "SlurmEngines", "MPIEngines", "EngineLaunch", "Placement",
    "engine_placement", "host_address", "rendezvous_toward", "slurm_job_name",
]


class ClusterError(RuntimeError):
    """The cluster could not be started, reached, or repaired."""


@dataclass(frozen=True)
class Placement:
    """Where one engine runs, from its own environment (see :func:`engine_placement`)."""

    host: str
    #: the launcher's local rank on this host (None: a local engine, ordered by engine id)
    local_rank: int | None
    #: the launcher's global rank (SLURM_PROCID, OMPI_COMM_WORLD_RANK), for information only
    launcher_rank: int | None
    #: "slurm", "mpi" or "local"
    source: str
    #: the job id for Slurm engines
    job_id: str | None
    cuda_visible_devices: str | None


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def engine_placement() -> Placement:
    """Run on an engine: its host and the ranks its launcher gave it."""
    env = os.environ
    if "SLURM_LOCALID" in env and "SLURM_STEP_ID" in env:
        source = "slurm"
        local, rank = _env_int("SLURM_LOCALID"), _env_int("SLURM_PROCID")
    elif "OMPI_COMM_WORLD_LOCAL_RANK" in env or "MPI_LOCALRANKID" in env:
        source = "mpi"
        local = _env_int("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
        rank = _env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK")
    else:
        source, local, rank = "local", None, None
    return Placement(
        host=socket.gethostname(), local_rank=local, launcher_rank=rank, source=source,
        job_id=env.get("SLURM_JOB_ID"), cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
    )


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def host_address() -> str:
    """An address of this host that other hosts reach: ``$NCCL_WORKBOOK_HOST_ADDR`` if set, else
    what this host's name resolves to, unless that is loopback (Debian maps its own name to
    127.0.1.1), then the source address of the default route (found with a UDP ``connect``,
    which sends nothing)."""
    explicit = os.environ.get("NCCL_WORKBOOK_HOST_ADDR")
    if explicit:
        return explicit
    try:
        addr = socket.gethostbyname(socket.gethostname())
    except OSError:
        addr = "127.0.0.1"
    if not _is_loopback(addr):
        return addr
    for probe in ("10.255.255.255", "192.168.255.255", "172.31.255.255"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((probe, 9))
                addr = s.getsockname()[0]
            except OSError:
                continue
        if not _is_loopback(addr):
            return addr
    raise ClusterError(
        f"this host's name {socket.gethostname()!r} resolves only to loopback and no route to another "
        f"host was found; set $NCCL_WORKBOOK_HOST_ADDR (or RankCluster(host_address=...)) to an address "
        f"the compute nodes reach"
    )


def rendezvous_toward(peer: str) -> tuple[str, int]:
    """Run on rank 0's engine: the address of its interface that routes to ``peer`` (the host
    the ranks' controller and hub listen on; loopback for a local cluster) and a free TCP port
    there. Other hosts reach that interface as the client's host does."""
    if _is_loopback(peer):
        addr = "127.0.0.1"
    else:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((peer, 9))  # UDP: picks the route, sends nothing
            addr = s.getsockname()[0]
    return addr, free_port(addr)


def free_port(addr: str, *, tries: int = 50) -> int:
    """A TCP port free on ``addr`` now, picked below the kernel's ephemeral range where one can be:
    the port is released before rank 0's store listens on it, and in between an outgoing connection
    (the ranks' own, or a client retrying a store that is not up yet) may be given any port of the
    ephemeral range, never one below it. ``bind(0)`` (a port of that range) when none is found."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(tries if low > 2048 else 0):
        port = rng.randrange(1024 + (low - 1024) // 2, low)   # upper half of the gap: fewer fixed services
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest port the kernel gives outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49152  # IANA's dynamic range (macOS, Windows)


def slurm_job_name(cluster_id: str) -> str:
    """The name of the engines' Slurm job (the reaper cancels by it: it exists before the job id
    is known to anyone but ``sbatch``)."""
    return f"nwb-engines-{cluster_id}"


def _run(cmd: list[str], timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as e:
        raise ClusterError(f"{cmd[0]} not found on PATH") from e
    except subprocess.TimeoutExpired as e:
        raise ClusterError(f"`{' '.join(cmd)}` did not answer within {timeout_s:g} s") from e


class EngineLaunch:
    """What every launch spec provides to :class:`~nccl_workbook.cluster.RankCluster`."""

    #: engines may run on other hosts (the controller then listens on :func:`host_address`)
    remote: bool = False

    def check(self, n_ranks: int) -> None:
        """Raise :class:`ClusterError` if engines cannot be launched here as asked."""

    def launcher_class(self) -> Any:
        """ipyparallel's engine-set launcher class (None: the cluster's default)."""
        return None

    def engine_set_options(self, cluster_id: str, profile_dir: str) -> dict[str, Any]:
        """Traits of that launcher, set on every engine set the cluster starts."""
        return {}

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True)
class LocalEngines(EngineLaunch):
    """Engines on this host (the default)."""

    def describe(self) -> str:
        return "local"


class NwbSlurmEngineSetLauncher(SlurmEngineSetLauncher):
    """ipyparallel's Slurm engine set; the cluster file names it by this import path so that
    another process can rebuild it (``Cluster.from_file``), as for ``_launcher.ForkEngineSetLauncher``."""

    entrypoint_name = "nccl_workbook.launchers.NwbSlurmEngineSetLauncher"


@dataclass(frozen=True)
class SlurmEngines(EngineLaunch):
    """One Slurm job with one engine per task: ``sbatch`` a script whose ``srun`` starts them.

    ``gpus_per_node`` is passed as ``--gpus-per-node`` (every task on a node sees all of them; rank
    ``local_rank`` uses GPU ``local_rank``), ``time_limit`` as ``--time`` (Slurm's formats: ``"30"``
    minutes, ``"1:00:00"``), ``extra_sbatch`` as further ``#SBATCH`` lines (e.g.
    ``("--constraint=a100",)``). ``start_timeout_s`` bounds the wait for the allocation to start and
    the engines to register: past it the job is cancelled and the error says why it was pending.
    """

    partition: str | None = None
    time_limit: str | None = None
    nodes: int | None = None
    ntasks_per_node: int | None = None
    gpus_per_node: int | None = None
    account: str | None = None
    extra_sbatch: tuple[str, ...] = ()
    start_timeout_s: float = 300.0
    remote: bool = field(default=True, init=False)

    def describe(self) -> str:
        opts = [f"{k}={v!r}" for k, v in (("partition", self.partition), ("time_limit", self.time_limit),
                ("nodes", self.nodes), ("gpus_per_node", self.gpus_per_node)) if v is not None]
        return f"slurm({', '.join(opts)})"

    def check(self, n_ranks: int) -> None:
        for tool in ("sbatch", "squeue", "scancel", "sinfo"):
            if shutil.which(tool) is None:
                raise ClusterError(
                    f"SlurmEngines needs Slurm's `{tool}` on PATH and it is not there; run this on a Slurm "
                    f"login node (or use the default local engines)"
                )
        if self.nodes is not None and self.ntasks_per_node is not None and self.nodes * self.ntasks_per_node != n_ranks:
            raise ClusterError(
                f"nodes={self.nodes} x ntasks_per_node={self.ntasks_per_node} is not n_ranks={n_ranks}"
            )
        if self.partition is not None:
            out = _run(["sinfo", "-h", "-o", "%P"])
            if out.returncode != 0:
                raise ClusterError(f"`sinfo` failed (is slurmctld reachable?): {out.stderr.strip()[:300]}")
            known = [p.rstrip("*") for p in out.stdout.split()]
            if self.partition not in known:
                raise ClusterError(
                    f"Slurm partition {self.partition!r} does not exist; known: {', '.join(known) or '(none)'}"
                )

    def launcher_class(self) -> Any:
        return NwbSlurmEngineSetLauncher

    def batch_template(self) -> str:
        """The engines' batch script, with ipyparallel's fields ``{n}``, ``{output_file}`` and
        ``{program_and_args}`` left for it to fill."""

        def esc(value: object) -> str:
            return str(value).replace("{", "{{").replace("}", "}}")

        lines = ["#!/bin/sh", "#SBATCH --export=ALL", "#SBATCH --job-name=nwb-engines-{cluster_id}",
                 "#SBATCH --ntasks={n}", "#SBATCH --output={output_file}"]
        for flag, value in (("--partition", self.partition), ("--time", self.time_limit),
                            ("--nodes", self.nodes), ("--ntasks-per-node", self.ntasks_per_node),
                            ("--gpus-per-node", self.gpus_per_node), ("--account", self.account)):
            if value is not None:
                lines.append(f"#SBATCH {flag}={esc(value)}")
        lines += [f"#SBATCH {esc(opt)}" for opt in self.extra_sbatch]
        # --kill-on-bad-exit=0: an engine that crashes (a rank's scenario may abort it) must not
        # take the other ranks' engines down with the step; the cluster replaces it
        lines.append("srun --kill-on-bad-exit=0 {program_and_args}")
        return "\n".join(lines) + "\n"

    def engine_set_options(self, cluster_id: str, profile_dir: str) -> dict[str, Any]:
        jobs = os.path.join(profile_dir, "log")
        os.makedirs(jobs, exist_ok=True)
        return {
            "batch_template": self.batch_template(),
            # ipyparallel writes the script to work_dir ('.') under a fixed name: two clusters
            # started from one folder would overwrite each other's; an absolute name wins the join
            "batch_file_name": os.path.join(jobs, f"slurm-engines-{cluster_id}-{time.time_ns()}.sbatch"),
        }

    # -- the job -------------------------------------------------------------------------------
    @staticmethod
    def job_state(job_id: str) -> tuple[str, str] | None:
        """(state, reason) of a job from ``squeue``, None once it has left the queue."""
        out = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
        line = out.stdout.strip()
        if out.returncode != 0 or not line:
            return None
        state, _, reason = line.partition("|")
        return state, reason

    @staticmethod
    def cancel(job_ids: list[str], *, wait_s: float = 15.0) -> None:
        """``scancel`` the jobs and wait (bounded) until they have left the queue."""
        if not job_ids or shutil.which("scancel") is None:
            return
        _run(["scancel", *job_ids])
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            out = _run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T"])
            live = [ln for ln in out.stdout.split() if ln and not ln.endswith("|COMPLETED")]
            if out.returncode != 0 or not live:
                return
            time.sleep(0.2)


class NwbMPIEngineSetLauncher(MPIEngineSetLauncher):
    """ipyparallel's mpiexec engine set without ``ipengine --mpi``: that flag imports mpi4py on
    every engine to order engine ids by MPI rank, and the workbook needs neither (its ranks talk
    through torch.distributed, and rank order comes from ``OMPI_COMM_WORLD_LOCAL_RANK``)."""

    entrypoint_name = "nccl_workbook.launchers.NwbMPIEngineSetLauncher"

    @property
    def program(self) -> list[str]:  # type: ignore[override]
        return list(self.engine_cmd)


@dataclass(frozen=True)
class MPIEngines(EngineLaunch):
    """``mpiexec -n N`` engines. ``mpiexec_args`` go before the program (e.g. ``("--hostfile",
    "hosts")`` or ``("--host", "a:2,b:2")``); ``allow_run_as_root`` adds Open MPI's switch for a
    container where everything runs as root."""

    mpiexec: str = "mpiexec"
    mpiexec_args: tuple[str, ...] = ()
    allow_run_as_root: bool = False
    remote: bool = field(default=True, init=False)

    def describe(self) -> str:
        return f"mpi({' '.join([self.mpiexec, *self.mpiexec_args])})"

    def check(self, n_ranks: int) -> None:
        if shutil.which(self.mpiexec) is None:
            raise ClusterError(f"MPIEngines needs `{self.mpiexec}` on PATH and it is not there (Debian: openmpi-bin)")

    def launcher_class(self) -> Any:
        return NwbMPIEngineSetLauncher

    def engine_set_options(self, cluster_id: str, profile_dir: str) -> dict[str, Any]:
        args = list(self.mpiexec_args)
        if self.allow_run_as_root:
            args.insert(0, "--allow-run-as-root")
        return {"mpi_cmd": [self.mpiexec], "mpi_args": args}

