"""One run of a rank program on a :class:`~nccl_workbook.cluster.RankCluster`: specs, polling,
deadline, collection.

:func:`run_program` makes one :class:`~nccl_workbook.rank.RankSpec` per rank (a fresh rendezvous
address and port, the group's timeout, where to publish progress and spill trace rows), sends
:func:`~nccl_workbook.rank.run_rank` to each rank's engine, and polls until every rank answered or
the client-side deadline passed. While it polls, a :class:`~nccl_workbook.observer.RunObserver`
watches the ranks (stalls named live, with stacks). Afterwards: a rank whose engine died is
``crashed``, one still busy at the deadline is ``timeout`` and its engine is killed (the cluster
replaces both before the next run), and the rows such ranks had recorded are read back by the
observer. A run whose own rendezvous failed (the ranks' ``init_process_group``, before the program
started: a port taken between pick and bind, a rank that could not reach the store in time on a
loaded machine: on a 2-core VM, 4 plain torch processes rendezvousing on 127.0.0.1 with a 3 s
timeout failed 7 times in 300, without the workbook) is repeated once on a new port, with a note;
a second failure is reported. Programs that make their own group
(``init_group=False``, the rendezvous scenario) are never repeated. The result is a
:class:`ClusterRun` value; nothing here raises for what the ranks did.

The cluster keeps the engines' lifecycle and health; this module only uses them, as ipyparallel's
``Client``/views use a ``Cluster``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook._state import state_dir, this_host
from nccl_workbook.observer import HangReport, RunObserver
from nccl_workbook.launchers import rendezvous_toward
from nccl_workbook.rank import EngineInfo, RankSpec, run_rank
from nccl_workbook.results import RankReport
from nccl_workbook.status import RankStatus

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.cluster import RankCluster

__all__ = ["ClusterRun", "Progress", "run_program"]

log = logging.getLogger(__name__)

#: called while a run is in progress with (seconds elapsed, ranks finished, world size)
Progress = Callable[[float, int, int], None]


@dataclass(frozen=True)
class ClusterRun:
    """The raw result of one run: per-rank reports plus what the cluster had to do."""

    reports: tuple[RankReport, ...]
    wall_s: float
    backend: str
    world_size: int
    pg_timeout_s: float
    clock_offsets_ns: dict[int, int]
    notes: tuple[str, ...]
    #: the first stall named while the run was in progress (None: no rank waited long)
    hang: HangReport | None = None
    #: every stall named during the run, oldest first
    stalls: tuple[HangReport, ...] = ()


def run_program(
    cluster: RankCluster,
    program: Callable[..., dict[str, Any] | None],
    params: Any,
    *,
    pg_timeout_s: float,
    world_size: int | None = None,
    deadline_s: float | None = None,
    debug_level: str | None = None,
    progress: Progress | None = None,
    flight_recorder: bool = False,
    live: bool = True,
    trace: bool = True,
    min_wait_s: float = 1.0,
    on_hang: Callable[[HangReport], None] | None = None,
    init_group: bool = True,
) -> ClusterRun:
    """Run ``program(ctx, params)`` on ``world_size`` ranks of ``cluster`` with a fresh process group.

    ``deadline_s`` is the client-side limit for the whole run (default: four times the group
    timeout plus 20 s); ranks still busy then are reported as ``timeout`` and their engines
    replaced. With ``live`` (default) a wait of more than ``min_wait_s`` in a collective that some
    ranks have not entered is named at once, with every rank's stack, and passed to ``on_hang``.
    """
    if pg_timeout_s <= 0:
        raise ValueError(f"pg_timeout_s must be > 0, got {pg_timeout_s}")
    notes = cluster.ensure_healthy()
    engines = cluster.engine_ids
    ws = world_size or cluster.n_ranks
    if not 1 <= ws <= len(engines):
        raise ValueError(f"world_size must be between 1 and {len(engines)} (the engines), got {ws}")
    deadline_s = deadline_s if deadline_s is not None else 4 * pg_timeout_s + 20
    ids = engines[:ws]
    info = cluster.engine_info
    hosts = [info[eid].host for eid in ids]
    local = len(set(hosts)) == 1 and hosts[0] == this_host()
    for attempt in (1, 2):
        reports, wall, stalls = _run_once(
            cluster, ids, program, params, local=local, pg_timeout_s=pg_timeout_s, deadline_s=deadline_s,
            debug_level=debug_level, progress=progress, flight_recorder=flight_recorder, live=live, trace=trace,
            min_wait_s=min_wait_s, on_hang=on_hang, init_group=init_group, notes=notes)
        failed = _rendezvous_failure(reports)
        if failed is None or attempt == 2:
            break
        # not what the program did: the run's own rendezvous failed (a port picked free and taken
        # by another socket before rank 0's store listened on it, a rank that could not reach the
        # store within the group's timeout on a loaded machine). Once more, on a new port; a
        # second failure is reported as it is.
        notes.append(f"the run's rendezvous failed before the program started ({failed}); "
                     "it was repeated once on a new port")
        log.info(notes[-1])
        notes.extend(cluster.ensure_healthy())  # ranks that waited past the deadline were killed
        ids = cluster.engine_ids[:ws]
    if progress is not None:
        progress(wall, ws, ws)
    for r, rep in sorted(reports.items()):
        if rep.status is RankStatus.CRASHED:
            notes.append(f"rank {r}'s engine died ({rep.error}); it is replaced before the next run")
    offsets = cluster.clock_offsets_ns(ws) if len(set(hosts)) > 1 else {r: 0 for r in range(ws)}
    return ClusterRun(
        reports=tuple(reports[r] for r in range(ws)),
        wall_s=wall,
        backend=cluster.backend,
        world_size=ws,
        pg_timeout_s=float(pg_timeout_s),
        clock_offsets_ns=offsets,
        notes=tuple(notes),
        hang=stalls[0] if stalls else None,
        stalls=stalls,
    )


def _run_once(cluster: RankCluster, ids: list[int], program: Callable[..., Any], params: Any, *, local: bool,
              pg_timeout_s: float, deadline_s: float, debug_level: str | None, progress: Progress | None,
              flight_recorder: bool, live: bool, trace: bool, min_wait_s: float,
              on_hang: Callable[[HangReport], None] | None, init_group: bool,
              notes: list[str]) -> tuple[dict[int, RankReport], float, tuple[HangReport, ...]]:
    """One rendezvous and one poll: the reports of every rank (a synthetic ``timeout`` for those
    still busy at the deadline, their engines killed), the wall time and the stalls named."""
    ws = len(ids)
    info = cluster.engine_info
    view = cluster.view
    # rank 0 binds on its interface toward the address the client's controller/hub use (loopback
    # for a local cluster), which the other hosts reach as they reach the client
    addr, port = view(ids[0]).apply_sync(rendezvous_toward, cluster.host_address(local))
    local_ranks = cluster.local_ranks(ids)  # the launcher's (SLURM_LOCALID, ...) where it gave one
    backend = cluster.backend
    observer = RunObserver(
        ws,
        hub=cluster.progress_hub(local) if live else None,
        # local ranks also append their trace rows to a file, so a rank whose engine dies or is
        # killed still has its rows in the result (they would die with the process otherwise)
        spill_dir=None if not (local and trace) else state_dir() / "spill" / _run_id(),
        min_wait_s=min_wait_s,
        on_stall=on_hang,
    )
    specs = [
        RankSpec(
            rank=r, world_size=ws, local_rank=local_ranks[r], backend=backend,
            init_method=f"tcp://{addr}:{port}", pg_timeout_s=float(pg_timeout_s),
            program=program, params=params, debug_level=debug_level, flight_recorder=flight_recorder,
            progress=observer.publisher_spec(), trace=trace, spill_path=observer.spill_path(r), init_group=init_group,
        )
        for r in range(ws)
    ]
    t0 = time.perf_counter()
    try:
        pending = {r: view(eid).apply_async(run_rank, specs[r]) for r, eid in enumerate(ids)}
        reports = _poll(pending, ids, info, observer, t0=t0, deadline_s=deadline_s, progress=progress)
        stalls = observer.finish()
        for r in sorted(set(range(ws)) - set(reports)):
            why = f"rank {r} did not finish within the client deadline of {deadline_s:g} s"
            notes.append(cluster.kill_engine(ids[r], why))
            reports[r] = _synthetic_report(r, RankStatus.TIMEOUT, why, info.get(ids[r]))
        wall = time.perf_counter() - t0
        notes.extend(_read_back(observer, reports))
    finally:
        observer.close()
    return reports, wall, stalls


def _rendezvous_failure(reports: dict[int, RankReport]) -> str | None:
    """The first error of a run whose own ``init_process_group`` failed on some rank (no rank ran
    the program), else None."""
    failed = [rep for _, rep in sorted(reports.items()) if rep.rendezvous_failed]
    if not failed or any(rep.status is RankStatus.OK or rep.steps for rep in reports.values()):
        return None
    return f"rank {failed[0].rank}: {failed[0].error}"


def _poll(pending: dict[int, Any], ids: list[int], info: dict[int, EngineInfo], observer: RunObserver, *,
          t0: float, deadline_s: float, progress: Progress | None) -> dict[int, RankReport]:
    """Collect the ranks' reports as they come, until all came or the deadline passed, letting the
    observer look at the ranks between checks. Ranks missing from the result did not answer."""
    reports: dict[int, RankReport] = {}
    ws = len(pending)
    while pending and time.perf_counter() - t0 < deadline_s:
        for r, ar in list(pending.items()):
            if ar.ready():
                reports[r] = _collect(r, ar, info.get(ids[r]))
                del pending[r]
        if progress is not None:
            progress(time.perf_counter() - t0, len(reports), ws)
        if pending:
            observer.poll()
            next(iter(pending.values())).wait(0.1)
    return reports


def _run_id() -> str:
    import uuid

    return uuid.uuid4().hex[:12]


def _read_back(observer: RunObserver, reports: dict[int, RankReport]) -> list[str]:
    """Give reports made up here (dead or killed engine: no rows came back) the rows their rank
    spilled; returns notes on what was read back."""
    notes = []
    for r, rep in list(reports.items()):
        if rep.rows:
            continue
        peers = [row for o, other in reports.items() if o != r for row in other.rows]
        rows = observer.recover_rows(r, died=rep.status is RankStatus.CRASHED, peer_rows=peers, fallback_ns=rep.t_end_ns)
        if rows:
            reports[r] = dataclasses.replace(rep, rows=rows)
            notes.append(f"rank {r}: {len(rows)} trace row(s) read back from the file its tracer wrote them to")
    return notes


def _collect(rank: int, ar: Any, info: EngineInfo | None) -> RankReport:
    import ipyparallel as ipp

    try:
        return ar.get(0)
    except ipp.error.EngineError as e:
        return _synthetic_report(rank, RankStatus.CRASHED, f"engine died: {e}", info)
    except ipp.error.RemoteError as e:
        if e.ename == "EngineError":  # the engine process died while running the rank
            return _synthetic_report(rank, RankStatus.CRASHED, f"engine died: {e.evalue}", info)
        # run_rank catches everything; any other RemoteError means it could not even start
        return _synthetic_report(rank, RankStatus.ERROR, f"{e.ename}: {e.evalue}", info)


def _synthetic_report(rank: int, status: RankStatus, error: str, info: EngineInfo | None) -> RankReport:
    now = time.time_ns()
    return RankReport(
        rank=rank, status=status, error=error, exc_type=None, traceback=None, steps=0,
        step_times_ns=(), rows=(), metrics={}, pid=info.pid if info else -1,
        host=info.host if info else "?", t_begin_ns=now, t_end_ns=now,
    )
