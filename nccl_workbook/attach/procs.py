"""The running job, from outside: its rank processes on this host, their stacks, their progress.

Read-only for the job: processes are found from ``/proc`` (psutil), stacks are read with
``py-spy dump`` (which pauses a process for a few milliseconds while it reads its memory; ~25 ms
per rank for Python frames, 0.2-0.6 s with ``--native``, measured on 4 gloo ranks), and progress is
read from the main thread's counters in ``/proc/PID/task/PID/``.

How a job is recognised: torchrun, ``torch.distributed.run``, srun/mpirun wrappers that export
``RANK`` and ``WORLD_SIZE`` (as torch's env:// init needs). Processes with both are grouped by
``TORCHELASTIC_RUN_ID`` (torchrun), else by ``MASTER_ADDR:MASTER_PORT``, else by parent process.
A rank's children inherit its environment (DataLoader workers, compile workers): of the
processes with the same rank, the outermost Python process is the rank.

"Stuck": a main thread that neither ran (user+system CPU ticks) nor switched context during the
interval did not move: it waits in a C call (a collective, a sleep, a lock). py-spy itself makes
a paused thread switch context, so the counters are read before any dump. On a GPU process (CUDA
loaded) blocking waits may spin, so there a rank is stuck when its main thread's stack is the same
in two dumps ``interval_s`` apart (not measured here: no GPU on the machine this was written on).

Usage::

    jobs, unreadable = find_jobs()
    job = pick_job(jobs, pid=None)            # AttachError when none or several
    ranks = observe(job, native=False, interval_s=0.5)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

__all__ = ["AttachError", "RankProcess", "Job", "find_jobs", "pick_job", "py_spy_dump", "main_thread_counters",
           "uses_cuda", "Snapshot", "observe"]


class AttachError(Exception):
    """Misuse or nothing to attach to; the message says what was found and what to do."""


@dataclass(frozen=True)
class RankProcess:
    rank: int
    pid: int
    world_size: int | None
    local_rank: int | None


@dataclass(frozen=True)
class Job:
    """One distributed job's processes on this host."""

    key: str
    ranks: tuple[RankProcess, ...]
    launcher_pid: int | None
    launcher: str  # its command line, shortened
    #: every pid of the job on this host: launcher, ranks, their children (to match ``--pid``)
    all_pids: frozenset[int]
    #: ranks the launcher started on this host (torchrun's LOCAL_WORLD_SIZE), if known
    local_world_size: int | None = None

    @property
    def single_host(self) -> bool:
        """True when the whole world was started on this host (so a rank not found here has exited)."""
        return self.local_world_size is not None and self.local_world_size == self.world_size

    @property
    def world_size(self) -> int | None:
        sizes = [r.world_size for r in self.ranks if r.world_size]
        return max(sizes) if sizes else None

    def describe(self) -> str:
        ranks = ", ".join(f"{r.rank}:{r.pid}" for r in self.ranks)
        launcher = f"launcher pid {self.launcher_pid} ({self.launcher})" if self.launcher_pid else "no launcher"
        return f"job {self.key}: {len(self.ranks)} of {self.world_size or '?'} ranks here (rank:pid {ranks}), {launcher}"


def _looks_like_python(name: str, cmdline: Sequence[str]) -> bool:
    exe = os.path.basename(cmdline[0]) if cmdline else ""
    return "python" in name.lower() or "python" in exe.lower()


def find_jobs() -> tuple[list[Job], int]:
    """Distributed jobs on this host, and how many processes could not be read (not root?)."""
    import psutil

    me = os.getpid()
    found: dict[str, list[tuple[psutil.Process, dict[str, str]]]] = {}
    unreadable = 0
    for p in psutil.process_iter(["pid", "ppid", "name", "cmdline"]):
        if p.pid == me:
            continue
        try:
            env = p.environ()
        except psutil.AccessDenied:
            unreadable += 1  # another user's process (as root: a process of another namespace)
            continue
        except (psutil.Error, OSError):
            continue
        if "RANK" not in env or "WORLD_SIZE" not in env:
            continue
        if env.get("TORCHELASTIC_RUN_ID"):
            key = f"run {env['TORCHELASTIC_RUN_ID']}"
        elif env.get("MASTER_PORT"):
            key = f"master {env.get('MASTER_ADDR', '?')}:{env['MASTER_PORT']}"
        else:
            key = f"parent {p.info['ppid']}"
        found.setdefault(key, []).append((p, env))

    jobs = []
    for key, members in found.items():
        pids = {p.pid for p, _ in members}
        by_rank: dict[int, list[tuple[psutil.Process, dict[str, str]]]] = {}
        for p, env in members:
            try:
                by_rank.setdefault(int(env["RANK"]), []).append((p, env))
            except ValueError:
                continue
        ranks = []
        for rank, candidates in sorted(by_rank.items()):
            # the outermost Python process of this rank: its children (DataLoader workers) inherit RANK
            def outer(c: tuple[psutil.Process, dict[str, str]]) -> tuple[bool, int]:
                p = c[0]
                return (not _looks_like_python(p.info["name"] or "", p.info["cmdline"] or []),
                        sum(1 for a in _ancestors(p) if a in pids))

            p, env = min(candidates, key=outer)
            ranks.append(RankProcess(rank=rank, pid=p.pid, world_size=_int(env.get("WORLD_SIZE")),
                                     local_rank=_int(env.get("LOCAL_RANK"))))
        launcher_pid, launcher = _launcher([p for p, _ in members], pids)
        # the job's own processes: ranks, their children (same environment), the launcher
        all_pids = set(pids) | ({launcher_pid} if launcher_pid is not None else set())
        local_sizes = {_int(env.get("LOCAL_WORLD_SIZE")) for _, env in members} - {None}
        jobs.append(Job(key=key, ranks=tuple(ranks), launcher_pid=launcher_pid, launcher=launcher,
                        all_pids=frozenset(all_pids - {1}),
                        local_world_size=max(local_sizes) if local_sizes else None))
    return sorted(jobs, key=lambda j: j.key), unreadable


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _ancestors(p) -> list[int]:  # noqa: ANN001
    try:
        return [a.pid for a in p.parents()]
    except Exception:  # noqa: BLE001
        return []


def _launcher(members: list, pids: set[int]) -> tuple[int | None, str]:  # noqa: ANN001
    """The parent shared by the rank processes that is not itself a rank (torchrun's agent)."""
    parents = {m.info["ppid"] for m in members} - pids
    if len(parents) != 1:
        return None, ""
    ppid = parents.pop()
    try:
        import psutil

        cmd = " ".join(psutil.Process(ppid).cmdline())
    except Exception:  # noqa: BLE001
        cmd = ""
    return ppid, (cmd[:77] + "…") if len(cmd) > 80 else cmd


def pick_job(jobs: Sequence[Job], pid: int | None = None, *, unreadable: int = 0) -> Job:
    """The job to attach to: the one holding ``pid`` (a rank, its launcher or a child), or the only one."""
    if not jobs:
        hint = (f"; the environment of {unreadable} other processes could not be read: run as root or as the "
                "job's user" if unreadable and hasattr(os, "geteuid") and os.geteuid() != 0 else "")
        raise AttachError("no distributed job found on this host: no process has RANK and WORLD_SIZE in its "
                          f"environment{hint}")
    if pid is not None:
        for j in jobs:
            if pid in j.all_pids:
                return j
        listing = "\n  ".join(j.describe() for j in jobs)
        raise AttachError(f"pid {pid} is not a rank, launcher or child of a job on this host; jobs found:\n  {listing}")
    if len(jobs) > 1:
        listing = "\n  ".join(j.describe() for j in jobs)
        raise AttachError(f"{len(jobs)} distributed jobs run on this host; pick one with --pid (a launcher or "
                          f"rank pid):\n  {listing}")
    return jobs[0]


def _py_spy() -> str | None:
    return shutil.which("py-spy") or next(
        (c for c in (os.path.join(os.path.dirname(sys.executable), "py-spy"),) if os.path.exists(c)), None)


#: how a dump that ran out of time is reported (and told apart from a failed one)
TIMED_OUT = "py-spy did not answer within"


def py_spy_dump(pid: int, *, native: bool = False, timeout_s: float = 10.0) -> tuple[str, str | None]:
    """``py-spy dump --full-filenames --pid PID [--native]``: (text, None), or ("", why not)."""
    exe = _py_spy()
    if exe is None:
        return "", "py-spy is not installed (pip install py-spy)"
    cmd = [exe, "dump", "--full-filenames", "--pid", str(pid)] + (["--native"] if native else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "", f"{TIMED_OUT} {timeout_s:g} s"
    if out.returncode != 0:
        err = (out.stderr.strip().splitlines() or ["no output"])[0]
        if "ermission" in out.stderr or "ptrace" in out.stderr.lower():
            err += " (py-spy needs root, or ptrace allowed: /proc/sys/kernel/yama/ptrace_scope 0 and the same user)"
        return "", f"py-spy failed: {err}"
    return out.stdout, None


def main_thread_counters(pid: int) -> tuple[int, int, int] | None:
    """(CPU ticks, voluntary, involuntary context switches) of a process's main thread (Linux)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
        vol = invol = 0
        with open(f"/proc/{pid}/task/{pid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    vol = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol = int(line.split()[1])
        return ticks, vol, invol
    except (OSError, IndexError, ValueError):
        return None


def uses_cuda(pid: int) -> bool:
    """True when the process has loaded the CUDA driver (its blocking waits may spin)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any("libcuda.so" in line for line in f)
    except OSError:
        return False


@dataclass(frozen=True)
class Snapshot:
    """What was read of one rank: its dump (or why not) and whether it moved."""

    rank: int
    pid: int
    text: str
    error: str | None
    stuck: bool | None


def _python_frames(text: str) -> list[tuple[str, str, int | None]] | None:
    """The main thread's Python frames of a dump (native frames left out), or None."""
    from nccl_workbook.attach.stacks import parse_dump

    t = parse_dump(text).main_thread()
    return [(f.function, f.path, f.line) for f in t.frames if not f.native] if t and t.frames else None


def observe(job: Job, *, native: bool = False, interval_s: float = 0.5, timeout_s: float = 10.0) -> list[Snapshot]:
    """Every rank's stack, and whether its main thread moved during ``interval_s`` (see the module
    docstring). Dumps run in parallel, each with ``timeout_s``; one that runs out of time is tried again alone."""
    pids = [r.pid for r in job.ranks]
    workers = max(1, min(16, len(pids)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        cuda = dict(zip(pids, pool.map(uses_cuda, pids)))
        first = dict(zip([p for p in pids if cuda[p]],
                         pool.map(lambda p: py_spy_dump(p, timeout_s=timeout_s), [p for p in pids if cuda[p]])))
        before = {p: main_thread_counters(p) for p in pids}
        time.sleep(interval_s)
        after = {p: main_thread_counters(p) for p in pids}
        dumps = dict(zip(pids, pool.map(lambda p: py_spy_dump(p, native=native, timeout_s=timeout_s), pids)))
    # on a loaded machine (py-spy unwinding every rank's native stack at once on a few busy cores) a dump can run
    # out of time: those ranks are asked again one at a time, with nothing else dumping beside them
    for p in pids:
        if dumps[p][1] is not None and dumps[p][1].startswith(TIMED_OUT):
            dumps[p] = py_spy_dump(p, native=native, timeout_s=timeout_s)
    out = []
    for r in job.ranks:
        text, err = dumps[r.pid]
        if cuda[r.pid]:
            a, b = _python_frames(first[r.pid][0]), _python_frames(text)
            stuck = None if a is None or b is None else a == b
        elif before[r.pid] is None or after[r.pid] is None:
            stuck = None
        else:
            stuck = before[r.pid] == after[r.pid]
        out.append(Snapshot(rank=r.rank, pid=r.pid, text=text, error=err, stuck=stuck))
    return out
