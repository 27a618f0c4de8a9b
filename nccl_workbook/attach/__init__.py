"""``nccl-workbook attach``: where is every rank of a job that hangs right now?

For a job started without the workbook (torchrun, ``python -m torch.distributed.run``, srun or
mpirun running a script that reads RANK/WORLD_SIZE): find its rank processes on this host, take
every rank's stack with py-spy, classify where each main thread is (in which collective, or
computing / loading data / in I/O / sleeping), group the ranks and name the odd ones out::

    ranks 0, 2, 3 in ALLREDUCE (DDP backward) at train.py:237; rank 1 loading data in read_block at train.py:108

Read-only for the job (py-spy pauses each rank for milliseconds; nothing is injected, no signal is
sent) and done in about a second. Multi-node: run it on every host with ``--json`` and merge the
files (:func:`merge`, ``nccl-workbook attach --merge a.json b.json``).

Parts: :mod:`.stacks` (pure: py-spy text -> place -> verdict), :mod:`.procs` (this host's
processes, py-spy, progress counters), :mod:`.commands` (argparse wiring).

Limits: only ranks of this host are seen (ranks on other hosts show as "not seen" until merged);
only the main thread is classified; py-spy needs root or ptrace permission. On NCCL (not tried
here, no GPU) a rank's Python thread usually waits at a CUDA synchronisation after the collective
was enqueued, so it reads as "computing" at that line.

Usage::

    from nccl_workbook.attach import attach, merge
    report = attach()                # the only job on this host (or attach(pid=LAUNCHER_OR_RANK_PID))
    report.message                   # the one line
    report.culprit_ranks             # (1,)
    report.to_json()                 # {ranks: [...], groups: [...], culprit_ranks, message, ...}
    merge([json_a, json_b]).message  # several hosts' reports as one
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nccl_workbook.attach.procs import AttachError, Job, find_jobs, observe, pick_job
from nccl_workbook.attach.stacks import (NOT_RUNNING, NOT_SEEN, Place, RankPlace, State, Verdict, classify, parse_dump,
                                         verdict)

__all__ = ["AttachReport", "AttachError", "attach", "merge", "load_report", "report_from_dumps", "State"]

#: version of the JSON written by ``--json`` (read back by ``--merge``)
JSON_FORMAT = 1


@dataclass(frozen=True)
class AttachReport:
    """Every rank's place and the verdict, for one host (or several merged)."""

    ranks: tuple[RankPlace, ...]
    verdict: Verdict
    world_size: int | None
    hosts: tuple[str, ...]
    #: the job (``run <TORCHELASTIC_RUN_ID>``, ``master addr:port`` or ``parent PID``), per host joined
    job: str
    launcher_pid: int | None = None
    #: how long the main threads were watched for progress
    interval_s: float = 0.0
    #: how long attach took
    wall_s: float = 0.0

    @property
    def message(self) -> str:
        return self.verdict.message

    @property
    def culprit_ranks(self) -> tuple[int, ...]:
        return self.verdict.culprit_ranks

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` contract: ``{ranks: [{rank, pid, host, state, op, frame, stack, …}],
        groups: [{ranks, frame, …}], culprit_ranks, message}`` plus the job's facts."""
        return {
            "format": JSON_FORMAT,
            "message": self.message,
            "culprit_ranks": list(self.culprit_ranks),
            "missing_ranks": list(self.verdict.missing_ranks),
            "world_size": self.world_size,
            "hosts": list(self.hosts),
            "job": self.job,
            "launcher_pid": self.launcher_pid,
            "interval_s": self.interval_s,
            "wall_s": round(self.wall_s, 3),
            "groups": [{"ranks": list(g.ranks), "frame": g.place.frame, "state": g.place.state.value,
                        "op": g.place.op, "via": g.place.via, "waiting": g.waiting, "text": g.describe()}
                       for g in self.verdict.groups],
            "ranks": [{"rank": r.rank, "pid": r.pid, "host": r.host, "state": r.place.state.value,
                       "op": r.place.op, "via": r.place.via, "function": r.place.function, "frame": r.place.frame,
                       "callers": list(r.place.callers), "stuck": r.stuck, "where": r.place.describe(),
                       "stack": r.stack}
                      for r in self.ranks],
        }

    def render(self, *, stacks: bool = False) -> str:
        """The message, then one line per rank (and with ``stacks`` every rank's dump)."""
        head = (f"{self.job}: {len(self.ranks)} of {self.world_size or '?'} ranks on {', '.join(self.hosts)}, "
                f"watched {self.interval_s:g} s, {self.wall_s:.1f} s in all")
        lines = [self.message, "", head]
        for r in self.ranks:
            moved = {True: "stuck", False: "moving", None: "?"}[r.stuck]
            mark = "*" if r.rank in self.culprit_ranks else " "
            lines.append(f" {mark} rank {r.rank:<3} pid {r.pid or '-':<8} {r.host:<12} {moved:<6} {r.place.describe()}")
        if self.culprit_ranks:
            lines.append(f"culprit ranks: {list(self.culprit_ranks)} (marked *)")
        if stacks:
            for r in self.ranks:
                lines += ["", f"-- rank {r.rank} (pid {r.pid}, {r.host})", r.stack.rstrip() or "(no stack)"]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td>{r.rank}{' *' if r.rank in self.culprit_ranks else ''}</td><td>{r.pid}</td>"
            f"<td>{html.escape(r.host)}</td><td>{r.place.state.value}</td><td>{html.escape(r.place.describe())}</td></tr>"
            for r in self.ranks)
        return (f"<p><b>{html.escape(self.message)}</b></p><table><tr><th>rank</th><th>pid</th><th>host</th>"
                f"<th>state</th><th>where</th></tr>{rows}</table>")


def report_from_dumps(dumps: dict[int, str], *, world_size: int | None = None, host: str = "",
                      stuck: dict[int, bool | None] | None = None, pids: dict[int, int] | None = None,
                      job: str = "", interval_s: float = 0.0) -> AttachReport:
    """A report from py-spy dump texts keyed by rank (pure; what :func:`attach` does after reading
    the processes). ``stuck``: per rank, whether its main thread was seen not to move."""
    ranks = []
    for rank in sorted(dumps):
        text = dumps[rank]
        dump = parse_dump(text)
        place = classify(dump) if text else Place(state=State.UNKNOWN)
        pid = (pids or {}).get(rank, dump.pid)
        ranks.append(RankPlace(rank=rank, place=place, pid=pid, host=host, stuck=(stuck or {}).get(rank),
                               stack=text))
    return AttachReport(ranks=tuple(ranks), verdict=verdict(ranks, world_size), world_size=world_size,
                        hosts=(host,) if host else (), job=job, interval_s=interval_s)


def attach(pid: int | None = None, *, native: bool = False, interval_s: float = 0.5,
           timeout_s: float = 10.0) -> AttachReport:
    """Attach to the job on this host (the only one, or the one holding ``pid``): every rank's
    stack and place, and the verdict. Raises :class:`AttachError` when there is no such job."""
    t0 = time.perf_counter()
    jobs, unreadable = find_jobs()
    job: Job = pick_job(jobs, pid, unreadable=unreadable)
    snaps = observe(job, native=native, interval_s=interval_s, timeout_s=timeout_s)
    host = socket.gethostname()
    ranks = []
    for s in snaps:
        place = classify(parse_dump(s.text)) if s.text else Place(state=State.UNKNOWN, via=s.error)
        ranks.append(RankPlace(rank=s.rank, place=place, pid=s.pid, host=host, stuck=s.stuck,
                               stack=s.text or f"({s.error})"))
    if ranks and all(r.place.state is State.UNKNOWN for r in ranks):
        raise AttachError(f"could not read any rank's stack: {ranks[0].place.via}")
    reason = NOT_RUNNING if job.single_host else NOT_SEEN
    return AttachReport(ranks=tuple(ranks), verdict=verdict(ranks, job.world_size, missing_reason=reason),
                        world_size=job.world_size,
                        hosts=(host,), job=job.key, launcher_pid=job.launcher_pid, interval_s=interval_s,
                        wall_s=time.perf_counter() - t0)


def _rank_from_json(d: dict[str, Any]) -> RankPlace:
    place = Place(state=State(d.get("state", "unknown")), op=d.get("op"), via=d.get("via"),
                  function=d.get("function"), frame=d.get("frame"), callers=tuple(d.get("callers") or ()))
    return RankPlace(rank=int(d["rank"]), place=place, pid=d.get("pid"), host=d.get("host") or "",
                     stuck=d.get("stuck"), stack=d.get("stack") or "")


def load_report(path: str | Path) -> dict[str, Any]:
    """Read one ``attach --json`` file; AttachError with the reason when it is not one."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise AttachError(f"cannot read {str(path)!r} as attach JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
        raise AttachError(f"{str(path)!r} is not the JSON of `nccl-workbook attach --json` (no 'ranks' list)")
    return data


def merge(reports: Sequence[dict[str, Any] | AttachReport]) -> AttachReport:
    """Several hosts' reports (``to_json()`` objects or reports) as one answer for the whole job."""
    ranks: dict[int, RankPlace] = {}
    hosts: list[str] = []
    jobs: list[str] = []
    world: int | None = None
    interval = wall = 0.0
    for rep in reports:
        d = rep.to_json() if isinstance(rep, AttachReport) else rep
        try:
            rs = [_rank_from_json(x) for x in d["ranks"]]
        except (KeyError, ValueError, TypeError) as e:
            raise AttachError(f"a report's ranks cannot be read ({e!r}); expected `attach --json` output") from None
        for r in rs:
            if r.rank in ranks and ranks[r.rank].host != r.host:
                raise AttachError(f"rank {r.rank} appears on two hosts ({ranks[r.rank].host}, {r.host}): "
                                  "these reports are of different jobs")
            ranks[r.rank] = r
        hosts += [h for h in d.get("hosts") or [] if h not in hosts]
        if d.get("job") and d["job"] not in jobs:
            jobs.append(d["job"])
        if d.get("world_size"):
            world = max(world or 0, int(d["world_size"]))
        interval = max(interval, float(d.get("interval_s") or 0))
        wall = max(wall, float(d.get("wall_s") or 0))
    rs = tuple(ranks[k] for k in sorted(ranks))
    return AttachReport(ranks=rs, verdict=verdict(rs, world), world_size=world, hosts=tuple(hosts),
                        job=" + ".join(jobs), interval_s=interval, wall_s=wall)
