"""A real Slurm for the tests: munged, slurmctld and one slurmd per node, in the foreground.

Debian's ``slurm-wlm`` and ``munge`` (``WITH_SLURM=1 scripts/setup.sh`` installs them), run as root
with a config made from ``tests/slurm/slurm.conf.in`` and a state folder of their own (munge key and
socket included): nothing under /etc or /run is used or changed. A node may live in a network
namespace (``prefix``: the command that enters it, see ``tests/multihost``). :meth:`SlurmDaemons.stop`
cancels every job, stops the daemons and waits for them; the fixtures register it as a finalizer.

Also here: :func:`cluster_factory` (clusters a test starts, stopped by a finalizer), :func:`require` (skip a test whose prerequisites are missing, with the reason; under
``CI=true`` fail instead) and :func:`leftover_daemons` (the after-test check).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

HERE = Path(__file__).resolve().parent
#: process names a test of tests/slurm, tests/mpi or tests/multihost may start; none may outlive it
DAEMON_NAMES = ("slurmctld", "slurmd", "slurmstepd", "munged", "mpirun", "mpiexec", "orterun", "orted")


def require(*, binaries: tuple[str, ...], what: str, root: bool = True) -> None:
    """Skip (fail under ``CI=true``) unless running as root with ``binaries`` on PATH."""
    ci = os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}
    problem = None
    if root and os.geteuid() != 0:
        problem = f"{what} needs root (daemons, namespaces); run as root or in the CI container"
    else:
        missing = [b for b in binaries if shutil.which(b) is None]
        if missing:
            problem = (f"{what} needs {', '.join(missing)} on PATH: install them with "
                       f"`WITH_SLURM=1 scripts/setup.sh` (Debian: slurm-wlm munge openmpi-bin iproute2)")
    if problem:
        if ci:
            pytest.fail(f"CI must not skip this: {problem}", pytrace=False)
        pytest.skip(problem)


def cluster_factory(request: pytest.FixtureRequest):  # noqa: ANN201 - returns the factory
    """``make(**RankCluster options)`` -> a RankCluster (not started) whose stop() is a finalizer of
    the requesting test, so no engine or job outlives it whatever the test does."""
    from nccl_workbook.cluster import RankCluster

    def make(**options: object) -> RankCluster:
        cluster = RankCluster(**options)  # type: ignore[arg-type]
        request.addfinalizer(cluster.stop)
        return cluster

    return make


def leftover_daemons(since: float) -> list[str]:
    """Slurm/munge/MPI processes started at or after ``since`` (a time.time()) that still run."""
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
        try:
            name = p.info["name"] or ""
            cmd = " ".join(p.info["cmdline"] or [])
            if p.info["create_time"] + 1 < since:
                continue
            if name in DAEMON_NAMES or any(cmd.startswith(n) or f"/{n} " in cmd for n in DAEMON_NAMES):
                if p.status() != psutil.STATUS_ZOMBIE:
                    found.append(f"{p.pid}: {cmd[:120]}")
        except psutil.Error:
            continue
    return found



def no_daemons_left(since: float) -> Iterator[None]:
    """A module fixture's body: yield, then check (waiting up to 10 s for them to go) that no
    daemon, job step or mpirun started since ``since`` is left."""
    yield
    deadline = time.monotonic() + 10
    while (left := leftover_daemons(since)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"left running: {left}"

def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Node:
    name: str
    addr: str
    cpus: int = 8
    #: GPUs Slurm schedules on this node (empty files stand for their devices: CPU ranks)
    gpus: int = 4
    #: argv that runs a command on this node (e.g. inside its network namespace); [] for this host
    prefix: list[str] = field(default_factory=list)


class SlurmDaemons:
    """munged + slurmctld + one slurmd per node; ``env`` is what a Slurm client needs (SLURM_CONF)."""

    def __init__(self, nodes: list[Node], *, ctld_host: str | None = None, ctld_prefix: list[str] | None = None,
                 ctld_port: int | None = None, slurmd_port: int | None = None) -> None:
        self.nodes = nodes
        self.ctld_host = ctld_host or nodes[0].name
        self.ctld_addr = nodes[0].addr if ctld_host is None else next(n.addr for n in nodes if n.name == ctld_host)
        self.ctld_prefix = ctld_prefix if ctld_prefix is not None else nodes[0].prefix
        self.ctld_port = ctld_port or free_port()
        self.slurmd_port = slurmd_port or free_port()
        self.state = Path(tempfile.mkdtemp(prefix="nwb-slurm-"))
        os.chmod(self.state, 0o755)
        self.conf = self.state / "slurm.conf"
        self.munge_socket = self.state / "munge" / "munge.socket"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {"SLURM_CONF": str(self.conf)}
        self.start_s: float | None = None

    # -- start ---------------------------------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> SlurmDaemons:
        t0 = time.monotonic()
        self._start_munge()
        nodes = "\n".join(
            f"NodeName={n.name} NodeAddr={n.addr} NodeHostname={n.name} CPUs={n.cpus} RealMemory=1000 "
            f"Gres=gpu:{n.gpus} State=UNKNOWN"
            for n in self.nodes
        )
        text = (HERE / "slurm.conf.in").read_text()
        for key, value in {"CTLD_HOST": self.ctld_host, "CTLD_ADDR": self.ctld_addr, "CTLD_PORT": self.ctld_port,
                           "SLURMD_PORT": self.slurmd_port, "MUNGE_SOCKET": self.munge_socket,
                           "STATE": self.state, "NODES": nodes}.items():
            text = text.replace(f"@{key}@", str(value))
        self.conf.write_text(text)
        gres = []
        for n in self.nodes:
            for i in range(n.gpus):
                (self.state / f"fake-gpu-{n.name}-{i}").touch()
            gres.append(f"NodeName={n.name} Name=gpu File={self.state}/fake-gpu-{n.name}-[0-{n.gpus - 1}]\n")
        (self.state / "gres.conf").write_text("AutoDetect=off\n" + "".join(gres))
        (self.state / "ctld").mkdir()
        env = {**os.environ, **self.env}
        self._spawn(self.ctld_prefix + ["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld.out", env)
        for n in self.nodes:
            self._spawn(n.prefix + ["slurmd", "-D", "-N", n.name, "-f", str(self.conf)], f"slurmd-{n.name}.out", env)
        deadline = time.monotonic() + timeout_s
        while True:
            out = self.run("sinfo", "-h", "-N", "-o", "%N %T")
            states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                break
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = self.logs()
                self.stop()
                raise RuntimeError(f"Slurm did not come up (nodes {states}, exited: {dead}):\n{logs}")
            time.sleep(0.3)
        self.start_s = time.monotonic() - t0
        return self

    def _start_munge(self) -> None:
        d = self.munge_socket.parent
        d.mkdir(mode=0o700)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn(["munged", "-F", "--force", f"--key-file={key}", f"--socket={self.munge_socket}",
                     f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                     f"--seed-file={d / 'munged.seed'}", "--num-threads=2"], "munged.out", dict(os.environ))
        deadline = time.monotonic() + 10
        while not self.munge_socket.exists():
            if time.monotonic() > deadline or self.procs[-1].poll() is not None:
                raise RuntimeError(f"munged did not start: {self.logs()}")
            time.sleep(0.05)

    def _spawn(self, argv: list[str], out_name: str, env: dict[str, str]) -> None:
        with open(self.state / out_name, "ab") as out:
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                               env=env, start_new_session=True))

    # -- use -----------------------------------------------------------------------------------
    def run(self, *argv: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command (squeue, scancel, ...) against these daemons."""
        # a client reaches slurmctld from the controller's host (its network namespace, if any)
        return subprocess.run([*self.ctld_prefix, *argv], capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, **self.env})

    def jobs(self) -> list[str]:
        """Jobs still in the queue: 'ID NAME STATE'."""
        out = self.run("squeue", "-h", "-o", "%i %j %T")
        return [line for line in out.stdout.splitlines() if line.strip()]

    def logs(self, tail: int = 1500) -> str:
        parts = []
        for f in sorted(self.state.glob("*.log")) + sorted(self.state.glob("*.out")):
            parts.append(f"--- {f.name}\n{f.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel every job, stop the daemons (TERM, then KILL), remove the state folder."""
        if any(p.poll() is None for p in self.procs) and shutil.which("scancel"):
            try:
                self.run("scancel", "--user", "root", timeout_s=10)
                deadline = time.monotonic() + 15
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.2)
            except (subprocess.SubprocessError, OSError):
                pass
        for p in reversed(self.procs):  # slurmds, slurmctld, then munged
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        # job steps (slurmstepd and the tasks) run in sessions of their own: none may survive
        for proc in psutil.process_iter(["name", "environ"]):
            if proc.pid == os.getpid():
                continue
            try:
                if proc.info["name"] == "slurmstepd" or (proc.info["environ"] or {}).get("SLURM_CONF") == str(self.conf):
                    proc.kill()
            except psutil.Error:
                pass
        self.procs.clear()
        shutil.rmtree(self.state, ignore_errors=True)
