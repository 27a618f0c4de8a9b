"""Typed results shared by the cluster, the scenarios, the diagnosis, the CLI and the notebooks.

A run is never an exception: a rank that timed out, saw its peer close the connection, raised, or
died is a :class:`RankOutcome` with a :class:`RankStatus`; the whole run is a :class:`RunResult`
whose ``outcome`` summarises them. ``RunResult.to_json()`` is the contract of
``nccl-workbook run --json`` (one object per variant).

Usage::

    result = run_scenario(cluster, "rank0-work-before-barrier", "broken")
    result.outcome            # Outcome.TIMEOUT
    result.culprit_ranks      # (0,)  diagnosed from the trace and the errors alone
    result.expected_culprits  # (0,)  declared by the scenario (ground truth)
    result.to_json()          # plain dict, JSON-serialisable
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nccl_workbook.status import Outcome, RankStatus, classify_error

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.diagnose import Diagnosis
    from nccl_workbook.observer import HangReport
    from nccl_workbook.trace import TraceRow

__all__ = [
    "RankStatus",
    "Outcome",
    "RankReport",
    "RankOutcome",
    "RunResult",
    "classify_error",
]


@dataclass(frozen=True)
class RankReport:
    """What one engine sends back after running its rank (internal wire format, picklable).

    ``rows`` are trace rows (see :mod:`nccl_workbook.trace`), ``metrics`` whatever small JSON-able
    values the rank program returned.
    """

    rank: int
    status: RankStatus
    error: str | None
    exc_type: str | None
    traceback: str | None
    steps: int
    step_times_ns: tuple[int, ...]
    rows: tuple[TraceRow, ...]
    metrics: dict[str, object]
    pid: int
    host: str
    t_begin_ns: int
    t_end_ns: int
    #: torch's flight-recorder dump (pickle bytes from ``_dump_fr_trace``), taken before the group
    #: was destroyed; present when the run failed or when asked for. The ring buffer is per
    #: process, so it also holds entries of earlier runs on this engine (older than t_begin_ns).
    fr_dump: bytes | None = None
    #: the rank failed in the workbook's own ``init_process_group`` (the run's rendezvous, before
    #: the program started): what the cluster did, not what the program did
    rendezvous_failed: bool = False


@dataclass(frozen=True)
class RankOutcome:
    """One rank's outcome, as shown to the user."""

    rank: int
    status: RankStatus
    error: str | None = None
    steps: int = 0
    step_time_median_s: float | None = None
    wall_s: float | None = None
    host: str | None = None
    pid: int | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "status": self.status.value,
            "error": self.error,
            "steps": self.steps,
            "step_time_median_s": _round(self.step_time_median_s),
        }


def _round(x: float | None, nd: int = 4) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(float(x), nd)


@dataclass(frozen=True)
class RunResult:
    """One variant of one scenario, run once on a cluster.

    ``expected_culprits``/``expected_op`` are the scenario's declared ground truth;
    ``culprit_ranks``/``failed_op`` are what :func:`nccl_workbook.diagnose.diagnose` concluded from
    the trace and the errors alone. For a successful run both culprit tuples are empty.
    """

    scenario: str
    variant: str
    backend: str
    world_size: int
    pg_timeout_s: float
    outcome: Outcome
    expected_culprits: tuple[int, ...]
    culprit_ranks: tuple[int, ...]
    expected_op: str | None
    failed_op: str | None
    per_rank: tuple[RankOutcome, ...]
    wall_s: float
    diagnosis: Diagnosis | None = field(default=None, compare=False, repr=False)
    trace: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    metrics: dict[int, dict[str, object]] = field(default_factory=dict, compare=False, repr=False)
    notes: tuple[str, ...] = ()
    #: rank -> torch flight-recorder dump (pickle bytes), see RankReport.fr_dump
    fr_dumps: dict[int, bytes] = field(default_factory=dict, compare=False, repr=False)
    #: rank -> wall-clock ns when that rank's run began on its engine (before the group existed);
    #: separates this run's flight-recorder entries from earlier runs' on the same engine
    t_begin_ns: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    #: the first stall named live, while the group was still alive (see nccl_workbook.observer)
    hang: HangReport | None = field(default=None, compare=False, repr=False)
    #: every stall named live during the run, oldest first
    stalls: tuple[HangReport, ...] = field(default=(), compare=False, repr=False)
    #: False for a run of a user's script or any program that is not a scenario: nothing to compare with
    has_ground_truth: bool = True

    @property
    def live_hang(self) -> HangReport | None:
        """The live detection, if it was never resolved (a wait that ended is not a hang)."""
        return self.hang if self.hang is not None and not self.hang.resolved else None

    @property
    def detected_after_s(self) -> float | None:
        """Seconds from hang onset (first rank entering the stuck collective) to the workbook
        naming the culprit, live; None when nothing hung."""
        return self.live_hang.detected_after_s if self.live_hang else None

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def diagnosis_agrees(self) -> bool:
        """True when the diagnosed culprits equal the declared ones (both empty for a clean run)."""
        return tuple(sorted(self.culprit_ranks)) == tuple(sorted(self.expected_culprits))

    def to_json(self) -> dict[str, object]:
        """The ``nccl-workbook run --json`` object for this variant."""
        d: dict[str, object] = {
            "scenario": self.scenario,
            "variant": self.variant,
            "backend": self.backend,
            "world_size": self.world_size,
            "pg_timeout_s": self.pg_timeout_s,
            "outcome": self.outcome.value,
            "expected_culprits": list(self.expected_culprits),
            "culprit_ranks": list(self.culprit_ranks),
            "expected_op": self.expected_op,
            "failed_op": self.failed_op,
            "per_rank": [r.to_json() for r in self.per_rank],
            "wall_s": _round(self.wall_s, 3),
            "notes": list(self.notes),
        }
        if self.diagnosis is not None:
            d["diagnosis"] = self.diagnosis.summary
        live = self.live_hang
        d["detected_after_s"] = None if live is None else round(live.detected_after_s, 3)
        d["detected_culprits"] = [] if live is None else list(live.culprit_ranks)
        d["stacks"] = {} if live is None else {str(k): v for k, v in live.stacks.items()}
        d["live"] = None if self.hang is None else self.hang.to_json()
        d["stalls"] = [s.to_json() for s in self.stalls]
        return d

    def detection_line(self) -> str:
        """The live detection in one line (:func:`nccl_workbook.render.live_line`)."""
        from nccl_workbook.render import live_line

        return live_line(self)

    def verdict_text(self) -> str:
        """The diagnosis next to the ground truth, a few lines (:func:`nccl_workbook.render.verdict_text`)."""
        from nccl_workbook.render import verdict_text

        return verdict_text(self)

    def ranks_frame(self) -> pd.DataFrame:
        """One row per rank, in rank order: status, the error in one readable line
        (:func:`~nccl_workbook.status.short_error`: build paths cut, file:line kept), steps, median
        step time (ms), seconds it ran."""
        import pandas as pd

        from nccl_workbook.status import short_error

        rows = sorted(self.per_rank, key=lambda r: r.rank)
        return pd.DataFrame(
            {
                "rank": [r.rank for r in rows],
                "status": [r.status.value for r in rows],
                "error": [short_error(r.error, 90) for r in rows],
                "steps": [r.steps for r in rows],
                "step_median_ms": [None if r.step_time_median_s is None else round(r.step_time_median_s * 1e3, 1) for r in rows],
                "ran_s": [None if r.wall_s is None else round(r.wall_s, 2) for r in rows],
            }
        ).set_index("rank")

    def summary_line(self) -> str:
        from nccl_workbook.render import summary_line

        return summary_line(self)

    def _repr_html_(self) -> str:
        from nccl_workbook.render import result_html

        return result_html(self)
