"""Real torchrun jobs for tests: run one with a deadline, or hold one running while a test acts on it.

Every job is started in its own session under coreutils ``timeout`` (the deadline holds even if
the test process dies), and carries a marker in its environment (``NCCL_WORKBOOK_TEST_JOB``) that
every descendant inherits. That marker matters because torchrun starts each rank with
``start_new_session=True`` (``torch/distributed/elastic/multiprocessing/subprocess_handler``): the
ranks are NOT in the launcher's process group, so ``killpg`` of the launcher alone would leave them.
At exit the helper kills the launcher's group, then every process that carries the job's marker
(each rank's own group, which holds its DataLoader workers too).

Usage::

    result = run_torchrun(TRAIN_DDP, "--steps", "20", nproc=4, deadline_s=60)
    assert result.returncode == 0, result.output

    with torchrun_job(TRAIN_DDP, "--fault", "stall-data", nproc=4, deadline_s=60) as job:
        pids = job.rank_pids()          # {rank: pid}, once all ranks have started
        job.wait_for("step 5:")         # a line in the job's output
        ...                             # act on the running job
    # here the whole job is gone
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = ["MARKER_ENV", "JobResult", "TorchrunJob", "torchrun_job", "run_torchrun", "torchrun_command",
           "marked_processes", "kill_marked", "leftover_job_processes", "assert_no_job_left"]

#: environment variable set on every test job (value: the job's id); inherited by all its processes
MARKER_ENV = "NCCL_WORKBOOK_TEST_JOB"


@dataclass(frozen=True)
class JobResult:
    """How a job ended."""

    returncode: int
    output: str
    wall_s: float
    #: the deadline killed it
    timed_out: bool


def torchrun_command(script: str | os.PathLike[str], *args: str, nproc: int = 4) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=N script args`` with this
    interpreter (the same as ``torchrun``)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            str(script), *map(str, args)]


def marked_processes(job_id: str | None = None) -> list[psutil.Process]:
    """Live processes carrying the test-job marker (of one job, or of any job)."""
    found = []
    me = os.getpid()
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            value = p.environ().get(MARKER_ENV)
        except (psutil.Error, OSError):
            continue
        if value is not None and (job_id is None or value == job_id):
            found.append(p)
    return found


def kill_marked(job_id: str | None = None) -> list[int]:
    """SIGKILL every process (and its process group) carrying the marker; returns their pids."""
    procs = marked_processes(job_id)
    for p in procs:
        try:
            os.killpg(os.getpgid(p.pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)
    return [p.pid for p in procs]


class TorchrunJob:
    """A running launcher command (torchrun or any other); see :func:`torchrun_job`."""

    def __init__(self, command: Sequence[str], *, deadline_s: float, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> None:
        self.job_id = uuid.uuid4().hex[:12]
        self.command = list(command)
        self.deadline_s = deadline_s
        # the job's own temporary folder, removed by close(): its output, and TMPDIR for everything it
        # starts, so what a killed rank cannot clean up (torchrun's torchelastic_*, multiprocessing's
        # pymp-*, torch's shared-memory folders) goes with it
        self.tmp_dir = Path(tempfile.mkdtemp(prefix="torchrun-job-"))
        full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TMPDIR": str(self.tmp_dir),
                    **(env or {}), MARKER_ENV: self.job_id}
        self.log_path = self.tmp_dir / "output.log"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        # `timeout` signals its whole process group at the deadline (torchrun then stops its ranks),
        # and SIGKILLs it 5 s later if that did not end it
        self.proc = subprocess.Popen(
            ["timeout", "--kill-after=5", f"{deadline_s:g}", *self.command],
            stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
            start_new_session=True,
        )
        os.close(fd)
        self.t0 = time.monotonic()

    def __repr__(self) -> str:
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"<TorchrunJob {self.job_id} pid={self.proc.pid} {state}: {' '.join(self.command)[:80]}>"

    @property
    def pid(self) -> int:
        """pid of the outermost process (coreutils ``timeout``, parent of the launcher)."""
        return self.proc.pid

    def launcher_pid(self) -> int | None:
        """pid of the launcher command itself (the child of ``timeout``)."""
        try:
            kids = psutil.Process(self.proc.pid).children()
        except psutil.Error:
            return None
        return kids[0].pid if kids else None

    def output(self) -> str:
        """Everything the job printed so far (stdout and stderr)."""
        return self.log_path.read_text(errors="replace")

    def rank_pids(self, world_size: int | None = None, timeout_s: float = 30.0) -> dict[int, int]:
        """{rank: pid} of the job's rank processes, once ``world_size`` of them run (the outermost
        process of each rank: DataLoader workers inherit RANK too)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ranks: dict[int, tuple[int, int]] = {}  # rank -> (depth, pid); the shallowest wins
            for p in marked_processes(self.job_id):
                try:
                    env = p.environ()
                    if "RANK" not in env:
                        continue
                    depth = len(p.parents())
                except (psutil.Error, OSError):
                    continue
                r = int(env["RANK"])
                if r not in ranks or depth < ranks[r][0]:
                    ranks[r] = (depth, p.pid)
                world_size = world_size or int(env.get("WORLD_SIZE", 0)) or None
            if world_size and len(ranks) >= world_size:
                return {r: pid for r, (_, pid) in sorted(ranks.items())}
            if self.proc.poll() is not None:
                raise RuntimeError(f"job ended (exit {self.proc.returncode}) before its ranks started:\n"
                                   f"{self.output()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"only ranks {sorted(ranks)} of {world_size} started within {timeout_s:g} s:\n"
                                   f"{self.output()[-2000:]}")
            time.sleep(0.1)

    def wait_for(self, text: str, timeout_s: float = 30.0) -> None:
        """Block until ``text`` appears in the output; raises TimeoutError (with the output) if not."""
        deadline = time.monotonic() + timeout_s
        while text not in self.output():
            if self.proc.poll() is not None and text not in self.output():
                raise RuntimeError(f"job ended (exit {self.proc.returncode}) before printing {text!r}:\n"
                                   f"{self.output()[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not printed within {timeout_s:g} s:\n{self.output()[-2000:]}")
            time.sleep(0.05)

    def wait(self, timeout_s: float | None = None) -> JobResult:
        """Wait for the job to end by itself (at most until its deadline, or ``timeout_s``)."""
        if timeout_s is None:  # `timeout` ends it by deadline_s + 5 s
            timeout_s = max(0.0, self.deadline_s + 10 - (time.monotonic() - self.t0))
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        return JobResult(returncode=rc, output=self.output(), wall_s=time.monotonic() - self.t0,
                         timed_out=rc in (124, 137, -9))

    def kill(self) -> None:
        """SIGKILL the launcher's group and every process of the job (each rank has its own group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_marked(self.job_id)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Kill the job (see kill()) and remove its temporary folder."""
        self.kill()
        shutil.rmtree(self.tmp_dir, ignore_errors=True)


@contextmanager
def torchrun_job(script: str | os.PathLike[str] | None = None, *args: str, nproc: int = 4,
                 deadline_s: float = 60.0, command: Sequence[str] | None = None,
                 env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                 ) -> Iterator[TorchrunJob]:
    """A running job: ``torchrun --standalone --nproc_per_node=nproc script args`` or an arbitrary
    launcher ``command``. Whatever happens in the ``with`` body, the whole job is killed at exit."""
    if command is None:
        if script is None:
            raise TypeError("torchrun_job needs a script or a command")
        command = torchrun_command(script, *args, nproc=nproc)
    job = TorchrunJob(command, deadline_s=deadline_s, env=env, cwd=cwd)
    try:
        yield job
    finally:
        job.close()


def run_torchrun(script: str | os.PathLike[str] | None = None, *args: str, nproc: int = 4,
                 deadline_s: float = 60.0, command: Sequence[str] | None = None,
                 env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = None) -> JobResult:
    """Run a job to its end (or its deadline) and return its exit code and output."""
    with torchrun_job(script, *args, nproc=nproc, deadline_s=deadline_s, command=command, env=env, cwd=cwd) as job:
        return job.wait()


def leftover_job_processes() -> list[psutil.Process]:
    """Processes a test job left: those carrying the marker or RANK, started under this test
    session's state folder (``NCCL_WORKBOOK_HOME``, which the root conftest makes unique, so the
    jobs of a test session running beside this one are not counted); outside a test session, all
    that carry the marker."""
    home = os.environ.get("NCCL_WORKBOOK_HOME")
    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid"]):
        if p.pid == me:
            continue
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        ours = env.get("NCCL_WORKBOOK_HOME") == home if home else True
        if ours and (MARKER_ENV in env or (home and "RANK" in env)):
            found.append(p)
    return found


def assert_no_job_left(grace_s: float = 5.0) -> None:
    """Fail (after killing them) when test jobs left processes behind."""
    deadline = time.monotonic() + grace_s
    left = leftover_job_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftover_job_processes()
    if left:
        desc = []
        for p in left:
            try:
                desc.append(f"{p.pid}: {' '.join(p.cmdline())[:100]}")
                p.kill()
            except psutil.Error:
                pass
        if desc:
            import pytest

            pytest.fail(f"torchrun job processes left behind: {desc}", pytrace=False)
