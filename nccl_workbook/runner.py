"""Run a scenario's variants on a cluster and turn each run into a diagnosed :class:`RunResult`.

This is the one call the notebooks, the widgets and the CLI share, so that they give the same
answers::

    with RankCluster(4) as cluster:
        results = run_variants(cluster, "rank0-work-before-barrier", ["broken", "shard-work"])
    [r.summary_line() for r in results]
    combined_trace(results)        # one frame, a `variant` column, times relative to each run

``run_scenario`` validates its input before touching the cluster and raises ``ValueError`` /
``KeyError`` with the valid choices; everything that happens on the ranks is data in the result.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from nccl_workbook.diagnose import diagnose
from nccl_workbook.results import RankOutcome, RunResult
from nccl_workbook.scenarios import get_scenario
from nccl_workbook.status import Outcome
from nccl_workbook.trace import trace_frame

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.cluster import RankCluster
    from nccl_workbook.cluster_run import ClusterRun, Progress
    from nccl_workbook.observer import HangReport

__all__ = ["run_scenario", "run_variants", "run_program", "result_from_run", "combined_trace", "resolve_variants",
           "validate_run_args"]


def resolve_variants(scenario_id: str, variant: str | Sequence[str]) -> list[str]:
    """``"all"`` -> every variant; a name or list of names -> checked list."""
    scenario = get_scenario(scenario_id)
    names = scenario.variant_names if variant == "all" else [variant] if isinstance(variant, str) else list(variant)
    for n in names:
        scenario.variant(n)  # raises KeyError listing the known variants
    return names


def validate_run_args(world_size: int, timeout_s: float | None, max_world_size: int) -> None:
    if world_size < 2:
        raise ValueError(f"world size must be at least 2 (a collective needs peers), got {world_size}")
    if world_size > max_world_size:
        raise ValueError(f"world size {world_size} is more than this cluster/machine can hold (max {max_world_size})")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout_s}")


def run_scenario(
    cluster: RankCluster,
    scenario_id: str,
    variant: str = "broken",
    *,
    world_size: int | None = None,
    timeout_s: float | None = None,
    progress: Progress | None = None,
    flight_recorder: bool = False,
    on_hang: Callable[[HangReport], None] | None = None,
    **param_overrides: Any,
) -> RunResult:
    """Run one variant once and diagnose it. ``timeout_s`` is the process-group timeout before the
    variant adjusts it (default: the scenario's); ``param_overrides`` change the scenario's
    ``Params`` (e.g. ``seconds_per_sample=1.0``). ``flight_recorder=True`` brings back every rank's
    flight-recorder dump also when the run succeeds (failed runs always bring them back).
    ``on_hang`` is called once, while the run is still going, when a hang is suspected (see
    :meth:`RankCluster.run`); the widgets use it to name the late rank before the timeout."""
    scenario = get_scenario(scenario_id)
    spec = scenario.variant(variant)
    ws = world_size or cluster.n_ranks
    validate_run_args(ws, timeout_s, cluster.max_world_size)
    params = scenario.params_for(variant, **param_overrides)
    pg_timeout = scenario.timeout_for(variant, timeout_s or scenario.default_timeout_s, params)
    run = cluster.run(
        scenario.program,
        params,
        pg_timeout_s=pg_timeout,
        world_size=ws,
        deadline_s=scenario.deadline_s(params, pg_timeout),
        debug_level=spec.debug_level,
        progress=progress,
        flight_recorder=flight_recorder,
        on_hang=on_hang,
        init_group=scenario.init_group,
    )
    return result_from_run(
        run, scenario=scenario.id, variant=variant,
        expected_culprits=() if spec.expect_ok else tuple(scenario.expected_culprits(params, ws)),
        expected_op=None if spec.expect_ok else scenario.expected_op,
    )


def result_from_run(run: ClusterRun, *, scenario: str, variant: str, expected_culprits: tuple[int, ...] = (),
                    expected_op: str | None = None, ground_truth: bool = True) -> RunResult:
    """One run's reports -> a diagnosed :class:`RunResult` (trace frame, per-rank outcomes, diagnosis).
    ``expected_*`` are the ground truth where one is known (a scenario's); empty for anything else."""
    rows = [row for rep in run.reports for row in rep.rows]
    trace = trace_frame(rows, offsets_ns=run.clock_offsets_ns)
    statuses = {rep.rank: rep.status for rep in run.reports}
    diag = diagnose(
        trace, statuses, world_size=run.world_size, pg_timeout_s=run.pg_timeout_s,
        tracebacks={rep.rank: rep.traceback for rep in run.reports},
    )
    per_rank = tuple(
        RankOutcome(
            rank=rep.rank,
            status=rep.status,
            error=rep.error,
            steps=rep.steps,
            step_time_median_s=statistics.median(rep.step_times_ns) / 1e9 if rep.step_times_ns else None,
            wall_s=(rep.t_end_ns - rep.t_begin_ns) / 1e9,
            host=rep.host,
            pid=rep.pid,
        )
        for rep in run.reports
    )
    return RunResult(
        scenario=scenario,
        variant=variant,
        backend=run.backend,
        world_size=run.world_size,
        pg_timeout_s=run.pg_timeout_s,
        outcome=Outcome.from_statuses([r.status for r in per_rank]),
        expected_culprits=expected_culprits,
        culprit_ranks=diag.culprit_ranks,
        expected_op=expected_op,
        failed_op=diag.failed_op,
        per_rank=per_rank,
        wall_s=run.wall_s,
        diagnosis=diag,
        trace=trace,
        metrics={rep.rank: dict(rep.metrics) for rep in run.reports},
        notes=run.notes,
        fr_dumps={rep.rank: rep.fr_dump for rep in run.reports if rep.fr_dump is not None},
        t_begin_ns={rep.rank: rep.t_begin_ns for rep in run.reports},
        hang=run.hang,
        stalls=run.stalls,
        has_ground_truth=ground_truth,
    )


def run_program(cluster: RankCluster, program: Callable[..., dict[str, Any] | None], params: Any, *, name: str,
                variant: str = "run", pg_timeout_s: float, **run_options: Any) -> RunResult:
    """Any rank program (not a registered scenario) run once and diagnosed like a scenario: the same
    :class:`RunResult`, with no ground truth. ``run_options`` as for :meth:`RankCluster.run`."""
    return result_from_run(cluster.run(program, params, pg_timeout_s=pg_timeout_s, **run_options),
                           scenario=name, variant=variant, ground_truth=False)


def run_variants(
    cluster: RankCluster,
    scenario_id: str,
    variants: str | Sequence[str] = "all",
    *,
    world_size: int | None = None,
    timeout_s: float | None = None,
    progress: Progress | None = None,
    **param_overrides: Any,
) -> list[RunResult]:
    """Run several variants one after another (each with a fresh process group)."""
    return [
        run_scenario(cluster, scenario_id, v, world_size=world_size, timeout_s=timeout_s, progress=progress, **param_overrides)
        for v in resolve_variants(scenario_id, variants)
    ]


def combined_trace(results: Sequence[RunResult]) -> pd.DataFrame:
    """The traces of several runs in one frame with a ``variant`` column and ``t_rel_ns`` columns
    (``t_enqueue_rel_ns``, ``t_end_rel_ns``) measured from each run's first event, so runs can be
    drawn on a shared time axis."""
    frames = []
    for r in results:
        if r.trace is None or len(r.trace) == 0:
            continue
        df = r.trace.copy()
        t0 = df["t_enqueue_ns"].min()
        df.insert(0, "variant", pd.array([r.variant] * len(df), dtype="string"))
        df["t_enqueue_rel_ns"] = df["t_enqueue_ns"] - t0
        df["t_end_rel_ns"] = df["t_end_ns"] - t0
        frames.append(df)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)
