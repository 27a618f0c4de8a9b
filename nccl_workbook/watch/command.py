"""``nccl-workbook watch -- COMMAND ...``: run a launcher command unchanged and watch every rank live.

The watching process hosts the observer's hub (:class:`~nccl_workbook.observer.ProgressHub`), starts
the command with the bootstrap first on ``PYTHONPATH`` (see :mod:`nccl_workbook.watch.agent`), and
polls: a status line (per rank: step and where it is), and every **stall** (ranks waiting in a
collective that others have not entered, longer than a threshold that adapts to the job: 20 x its
median collective latency, 2 x its median step time, at least ``--min-wait-s``) reported at once
with the late ranks, the collective and every rank's stack, and again when it resolves. When the job
ends: how each rank ended, the first failure (the earliest real error, not a peer's "connection
closed"), the culprit ranks (from the stalls, the errors and the trace's diagnosis), and with
``--out DIR`` the trace (CSV), a Chrome/Perfetto trace, the plots and the report.

Signals to ``watch`` (Ctrl-C, SIGTERM) go to the launcher; if it has not ended ``grace_s`` later, its
whole process group is killed. ``watch`` exits with the job's exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from nccl_workbook._state import package_pythonpath
from nccl_workbook.observer import HangReport, ProgressHub, RunObserver
from nccl_workbook.watch.agent import WATCH_DIR_ENV, WATCH_ENV
from nccl_workbook.watch.report import RankEnd, WatchReport, stall_line

__all__ = ["watch", "add_parsers", "WatchError", "BOOTSTRAP_DIR"]

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent / "bootstrap")
POLL_S = 0.2
#: a wait counts as a stall after this many times the job's median step time (and 20 x its median
#: collective latency, and the --min-wait-s floor): what is normal for this job is not reported
STEP_FACTOR = 2.0
STATUS_EVERY_S = 1.0
#: how long after the first signal the launcher gets to stop its ranks before its group is killed
GRACE_S = 10.0


class WatchError(RuntimeError):
    """``watch`` could not start (bad command, hub address not usable)."""


@dataclass
class _Job:
    proc: subprocess.Popen[bytes]
    hub: ProgressHub
    run_id: str
    folder: Path
    observer: RunObserver | None = None
    world_size: int | None = None
    killed_by_watch: bool = False
    t_offsets: float = field(default_factory=time.monotonic)


def _job_env(hub: ProgressHub, run_id: str, folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, package_pythonpath(env.get("PYTHONPATH", ""))])
    env[WATCH_ENV] = f"{hub.host}:{hub.port}:{run_id}"
    env[WATCH_DIR_ENV] = str(folder)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _start(command: Sequence[str], hub_host: str) -> _Job:
    if not command:
        raise WatchError("no command to watch: put it after --, e.g. nccl-workbook watch -- torchrun --nproc_per_node=4 train.py")
    if shutil.which(command[0]) is None and not os.path.exists(command[0]):
        raise WatchError(f"command not found: {command[0]}")
    try:
        hub = ProgressHub(hub_host)
    except Exception as e:  # noqa: BLE001 - TCPStore raises RuntimeError/DistNetworkError
        raise WatchError(f"cannot host the progress hub on {hub_host!r} ({type(e).__name__}: {str(e).splitlines()[0]}); "
                         f"give --hub-host an address of this machine that the ranks can reach") from None
    run_id = uuid.uuid4().hex[:12]
    folder = Path(tempfile.mkdtemp(prefix="nccl-workbook-watch-"))
    try:
        proc = subprocess.Popen(list(command), env=_job_env(hub, run_id, folder), start_new_session=True)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise WatchError(f"cannot start {command[0]}: {e.strerror or e}") from None
    return _Job(proc, hub, run_id, folder)


def _world_size(job: _Job) -> int | None:
    """The job's world size, once its first rank published who it is."""
    store = job.hub._store  # noqa: SLF001 - the hub's own store
    for r in range(4096):
        key = f"{job.run_id}/who/{r}"
        if store.check([key]):
            return int(json.loads(store.get(key))["world_size"])
        if r > 64:  # ranks publish in any order; do not scan forever on every poll
            break
    return None


def _who(job: _Job, world_size: int) -> dict[int, dict[str, Any]]:
    store, out = job.hub._store, {}  # noqa: SLF001
    for r in range(world_size):
        for kind in ("who", "final", "timeout"):
            key = f"{job.run_id}/{kind}/{r}"
            if store.check([key]):
                value = json.loads(store.get(key))
                out.setdefault(r, {}).update({f"{kind}_{k}": v for k, v in value.items()} if isinstance(value, dict)
                                             else {f"{kind}_s": value})
    return out


def _clock_sync(job: _Job) -> None:
    """Answer the ranks' clock pings (ranks on other hosts estimate their clock's lead over this
    process's, see ``ProgressPublisher(clock_sync=True)``) and take the offsets they publish."""
    assert job.observer is not None
    store = job.hub._store  # noqa: SLF001
    pending = [r for r in range(job.world_size or 0) if r not in job.observer.offsets_ns]
    if not pending or time.monotonic() - job.t_offsets > 60:  # every rank has one, or it is too late
        return
    for r in pending:
        ping, offset = f"{job.run_id}/ping/{r}", f"{job.run_id}/offset/{r}"
        if store.check([offset]):
            job.observer.offsets_ns[r] = int(store.get(offset))
        elif store.check([ping]):
            i = store.get(ping).decode()
            store.set(f"{job.run_id}/pong/{r}/{i}", str(time.time_ns()))


def _status_line(job: _Job, elapsed_s: float) -> str:
    assert job.observer is not None
    states, now = job.observer.states(), time.time_ns()
    parts = []
    for r in range(job.world_size or 0):
        s = states.get(r)
        if s is None:
            parts.append(f"{r}: -")
        elif s.coll_op is not None and s.coll_since_ns is not None:
            parts.append(f"{r}: s{s.steps_done} {s.coll_op} {(now - s.coll_since_ns) / 1e9:.1f}s")
        else:
            parts.append(f"{r}: s{s.steps_done}")
    return f"[watch {elapsed_s:6.1f}s] " + " | ".join(parts)


def _stall_text(h: HangReport, *, stack_lines: int = 4) -> str:
    out = [stall_line(h)]
    for r in sorted(h.where):
        mark = "  <- late" if r in h.culprit_ranks else ""
        out.append(f"    rank {r}: {h.where[r]}{mark}")
    for r in sorted(h.stacks):
        out.append(f"    rank {r} stack (innermost last):")
        out.extend(f"      {line}" for line in _innermost(h.stacks[r], stack_lines))
    return "\n".join(out)


def watch(command: Sequence[str], *, hub_host: str = "127.0.0.1", min_wait_s: float = 1.0,
          out: Path | None = None, timeout_s: float | None = None, stream: TextIO = sys.stderr,
          status_every_s: float = STATUS_EVERY_S, on_stall: Callable[[HangReport], None] | None = None) -> WatchReport:
    """Run ``command`` and watch it (see the module docstring); returns the report when it ended.
    ``timeout_s``: stop the job (as Ctrl-C would) after that long."""
    t0 = time.monotonic()
    job = _start(command, hub_host)
    tty = stream.isatty()
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda s, f: received.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}

    def report_stall(h: HangReport) -> None:
        print(("\r\033[K" if tty else "") + _stall_text(h), file=stream, flush=True)
        if on_stall is not None:
            on_stall(h)

    try:
        last_status, signalled_at = 0.0, None
        resolved_seen: set[tuple[str, int]] = set()
        while job.proc.poll() is None:
            now = time.monotonic() - t0
            if timeout_s is not None and now > timeout_s and signalled_at is None:
                received.append(signal.SIGINT)
                print(f"nccl-workbook watch: --timeout {timeout_s:g} s reached; stopping the job", file=stream, flush=True)
            if received and signalled_at is None:
                signalled_at = now
                job.killed_by_watch = True
                _signal_group(job.proc, received[-1])
            if signalled_at is not None and now - signalled_at > GRACE_S:
                _signal_group(job.proc, signal.SIGKILL)
                _kill_job_processes(job)
            if job.observer is None:
                ws = _world_size(job)
                if ws is not None:
                    job.world_size = ws
                    job.observer = RunObserver(ws, hub=job.hub, run_id=job.run_id, min_wait_s=min_wait_s,
                                               step_factor=STEP_FACTOR, on_stall=report_stall)
            if job.observer is not None:
                if job.hub.host not in ("127.0.0.1", "localhost"):
                    _clock_sync(job)
                job.observer.poll()
                for h in job.observer.stalls:
                    if h.resolved and (h.pg, h.seq) not in resolved_seen:
                        resolved_seen.add((h.pg, h.seq))
                        print(("\r\033[K" if tty else "") + stall_line(h), file=stream, flush=True)
                if status_every_s and now - last_status >= status_every_s:
                    last_status = now
                    line = _status_line(job, now)
                    print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", file=stream, flush=True)
            time.sleep(POLL_S)
        exit_code = job.proc.returncode
        if tty:
            print("\r\033[K", end="", file=stream)
        return _finish(job, tuple(command), exit_code, time.monotonic() - t0, out)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if job.proc.poll() is None:
            _signal_group(job.proc, signal.SIGKILL)
            job.proc.wait(10)
        _signal_group(job.proc, signal.SIGKILL)
        _kill_job_processes(job)  # ranks left behind by a launcher that died (each in its own session)
        shutil.rmtree(job.folder, ignore_errors=True)


def _job_processes(job: _Job) -> list[Any]:
    """Every process on this host that carries this job's ``$NCCL_WORKBOOK_WATCH`` (the launcher's
    descendants: torchrun starts each rank in a session of its own, so the launcher's process group
    does not hold them)."""
    import psutil

    spec = f"{job.hub.host}:{job.hub.port}:{job.run_id}"
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid != os.getpid() and p.environ().get(WATCH_ENV) == spec:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def _kill_job_processes(job: _Job) -> None:
    import psutil

    procs = _job_processes(job)
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=5)


def _innermost(stack: str, frames: int) -> list[str]:
    """The innermost ``frames`` frames of a Python stack, each as ``file:line in fn: source``."""
    lines = stack.rstrip().splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        text = line.strip()
        if text.startswith("File "):
            code = lines[i + 1].strip() if i + 1 < len(lines) and not lines[i + 1].strip().startswith("File ") else ""
            out.append(text + (f": {code}" if code else ""))
    return out[-frames:]


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)  # the launcher forwards it to its ranks, as from a terminal
    except (ProcessLookupError, PermissionError):
        pass


def _finish(job: _Job, command: tuple[str, ...], exit_code: int, wall_s: float, out: Path | None) -> WatchReport:
    from nccl_workbook.diagnose import diagnose
    from nccl_workbook.status import RankStatus
    from nccl_workbook.trace import read_spill, trace_frame

    if job.observer is None and job.world_size is None:
        ws = _world_size(job)
        if ws is not None:
            job.world_size = ws
            job.observer = RunObserver(ws, hub=job.hub, run_id=job.run_id)
    stalls = job.observer.finish() if job.observer is not None else ()
    ws = job.world_size or 0
    info = _who(job, ws) if ws else {}
    ranks = []
    for r in range(ws):
        i = info.get(r, {})
        status = i.get("final_status")
        if status is None:
            status = "killed" if job.killed_by_watch else "crashed"
        ranks.append(RankEnd(rank=r, host=i.get("who_host"), pid=i.get("who_pid"), status=status,
                             error=i.get("final_error"), steps=int(i.get("final_steps") or 0), t_end_ns=i.get("final_t_ns")))
    rows = [row for r in range(ws) for row in read_spill(str(job.folder / f"rank{r}.jsonl"))]
    trace = trace_frame(rows, offsets_ns=job.observer.offsets_ns if job.observer is not None else None)
    statuses = {r.rank: RankStatus(r.status) if r.status in {s.value for s in RankStatus} else RankStatus.CRASHED
                for r in ranks}
    pg_timeout_s = max((float(i.get("timeout_s") or 0) for i in info.values()), default=0.0) or 1800.0
    diag = diagnose(trace, statuses, world_size=ws, pg_timeout_s=pg_timeout_s,
                    tracebacks={r.rank: r.error for r in ranks}) if ws else None
    first = _first_failure(ranks)
    culprits = _culprits(first, stalls, diag)
    report = WatchReport(command=command, exit_code=exit_code, world_size=job.world_size, wall_s=wall_s,
                         ranks=tuple(ranks), stalls=stalls, first_failure=first, culprit_ranks=culprits,
                         diagnosis=diag, trace=trace)
    if out is not None:
        write_outputs(report, out)
    return report


def _first_failure(ranks: list[RankEnd]) -> tuple[int, str] | None:
    """The earliest rank that failed by itself (an error, or a timeout of its own), not a peer's
    "connection closed" nor a rank the launcher stopped."""
    own = [r for r in ranks if r.status in ("error", "timeout", "crashed") and r.error]
    own.sort(key=lambda r: (r.status != "error", r.t_end_ns or 0))
    return (own[0].rank, own[0].error or "") if own else None


def _culprits(first: tuple[int, str] | None, stalls: tuple[HangReport, ...], diag: Any) -> tuple[int, ...]:
    open_stalls = [h for h in stalls if not h.resolved]
    if first is not None and not first[1].lower().count("timed out"):
        return (first[0],)
    if open_stalls:
        return tuple(open_stalls[-1].culprit_ranks)
    if diag is not None and diag.culprit_ranks:
        return tuple(diag.culprit_ranks)
    return (first[0],) if first is not None else ()


def write_outputs(report: WatchReport, out: Path) -> None:
    """The trace (CSV), a Chrome/Perfetto trace, the timeline and step-time plots (PNG) and the
    report (JSON and text) into ``out``."""
    from nccl_workbook import plots
    from nccl_workbook.watch.report import chrome_trace

    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=2))
    (out / "report.txt").write_text(report.to_text() + "\n")
    df = report.trace
    if df is None or len(df) == 0:
        return
    df.to_csv(out / "trace.csv", index=False)
    (out / "trace.perfetto.json").write_text(json.dumps(chrome_trace(df)))
    rel = df.copy()
    t0 = rel["t_enqueue_ns"].min()
    rel.insert(0, "variant", "job")
    rel["t_enqueue_rel_ns"], rel["t_end_rel_ns"] = rel["t_enqueue_ns"] - t0, rel["t_end_ns"] - t0
    plots.timeline(rel, title="watched job").savefig(out / "timeline.png", dpi=100)
    plots.step_and_collective_times(rel, title="watched job").savefig(out / "times.png", dpi=100)


# -- the CLI face ------------------------------------------------------------------------------
def add_parsers(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "watch",
        help="run your launcher command unchanged and name late ranks live (stalls, stacks, first failure)",
        description=("Run COMMAND (torchrun ..., python -m torch.distributed.run ..., srun ..., mpirun ...) unchanged, "
                     "trace every rank through a bootstrap on PYTHONPATH, report every stall live and how the job ended."),
        usage="nccl-workbook watch [options] -- COMMAND [ARGS ...]",
    )
    p.add_argument("--out", default=None, help="folder for the trace (CSV, Perfetto JSON), plots and report")
    p.add_argument("--json", default=None, metavar="PATH", help="write the JSON report to PATH (- for stdout)")
    p.add_argument("--hub-host", default="127.0.0.1",
                   help="address of this machine the ranks report to (default loopback: single-node jobs)")
    p.add_argument("--min-wait-s", type=float, default=1.0, help="the stall threshold's floor in seconds (default 1)")
    p.add_argument("--timeout", type=float, default=None, help="stop the job after this many seconds")
    p.add_argument("--quiet", action="store_true", help="no live status line")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the launcher command, after --")
    p.set_defaults(func=run_watch)


def run_watch(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if args.min_wait_s <= 0:
        print("nccl-workbook: error: --min-wait-s must be > 0", file=sys.stderr)
        return 2
    if args.hub_host not in ("127.0.0.1", "localhost", "0.0.0.0"):
        try:
            socket.getaddrinfo(args.hub_host, None)
        except OSError:
            print(f"nccl-workbook: error: --hub-host {args.hub_host!r} does not resolve", file=sys.stderr)
            return 2
    try:
        report = watch(command, hub_host=args.hub_host, min_wait_s=args.min_wait_s,
                       out=Path(args.out) if args.out else None, timeout_s=args.timeout,
                       status_every_s=0 if args.quiet else STATUS_EVERY_S)
    except WatchError as e:
        print(f"nccl-workbook: error: {e}", file=sys.stderr)
        return 2
    print(report.to_text(), file=sys.stderr)
    if args.json:
        text = json.dumps(report.to_json(), indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    if args.out:
        print(f"wrote trace, plots and report to {args.out}/", file=sys.stderr)
    return report.exit_code
