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

import enum
import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.diagnose import Diagnosis
    from nccl_workbook.live import HangReport

__all__ = [
    "RankStatus",
    "Outcome",
    "RankReport",
    "RankOutcome",
    "RunResult",
    "classify_error",
]


class RankStatus(str, enum.Enum):
    """How one rank's run ended."""

    OK = "ok"
    #: the rank waited in a collective (or for the store) until the process-group timeout fired,
    #: or did not answer within the client-side deadline
    TIMEOUT = "timeout"
    #: a peer closed its connection (gloo: "Connection closed by peer"); the rank itself was fine
    PEER_CLOSED = "peer_closed"
    #: the rank's own code raised
    ERROR = "error"
    #: the rank's process died (signal, abort) or its engine had to be killed
    CRASHED = "crashed"


class Outcome(str, enum.Enum):
    """How a whole run ended, from its ranks' statuses (see :meth:`Outcome.from_statuses`)."""

    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"
    CRASHED = "crashed"

    @classmethod
    def from_statuses(cls, statuses: list[RankStatus]) -> Outcome:
        """``crashed`` if any rank died, else ``timeout`` if any timed out, else ``error`` if any
        rank failed in another way, else ``ok``."""
        if RankStatus.CRASHED in statuses:
            return cls.CRASHED
        if RankStatus.TIMEOUT in statuses:
            return cls.TIMEOUT
        if any(s is not RankStatus.OK for s in statuses):
            return cls.ERROR
        return cls.OK


_TIMEOUT_MARKERS = (
    "timed out",
    "timeout",
    "watchdog caught collective operation",
)
_PEER_MARKERS = (
    "connection closed by peer",
    "connection reset by peer",
    "application timeout caused pair closure",
    "broken pipe",
    "ncclremoteerror",
)


def classify_error(exc_type: str, message: str) -> RankStatus:
    """Map an exception raised on a rank to a :class:`RankStatus`.

    >>> classify_error("RuntimeError", "[../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete")
    <RankStatus.TIMEOUT: 'timeout'>
    >>> classify_error("RuntimeError", "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:1234")
    <RankStatus.PEER_CLOSED: 'peer_closed'>
    >>> classify_error("ValueError", "corrupt sample 17")
    <RankStatus.ERROR: 'error'>
    """
    text = message.lower()
    # Peer closure is checked first: gloo's "Application timeout caused pair closure" names a
    # timeout, but it is the peer's timeout, not this rank's.
    if any(m in text for m in _PEER_MARKERS):
        return RankStatus.PEER_CLOSED
    if exc_type in {"DistBackendError", "RuntimeError", "DistStoreError", "TimeoutError", "DistError"} and any(
        m in text for m in _TIMEOUT_MARKERS
    ):
        return RankStatus.TIMEOUT
    return RankStatus.ERROR


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
    rows: tuple[tuple, ...]
    metrics: dict[str, object]
    pid: int
    host: str
    t_begin_ns: int
    t_end_ns: int
    #: torch's flight-recorder dump (pickle bytes from ``_dump_fr_trace``), taken before the group
    #: was destroyed; present when the run failed or when asked for. The ring buffer is per
    #: process, so it also holds entries of earlier runs on this engine (older than t_begin_ns).
    fr_dump: bytes | None = None


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
    #: the hang named live, while the group was still alive (see nccl_workbook.live)
    hang: HangReport | None = field(default=None, compare=False, repr=False)

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
        return d

    def detection_line(self) -> str:
        """The live detection next to what the timeout needed, in one line."""
        live = self.live_hang
        if live is None:
            if self.hang is not None:
                return (f"live: ranks {list(self.hang.waiting_ranks)} waited for rank(s) {list(self.hang.culprit_ranks)} "
                        f"in {self.hang.op} (named after {self.hang.detected_after_s:.1f} s), then it completed")
            return "live: no rank waited long enough to suspect a hang"
        return (f"live: named rank(s) {list(live.culprit_ranks)} in {live.op} {live.detected_after_s:.1f} s after the "
                f"others started waiting; the {self.pg_timeout_s:g} s timeout needed {self.pg_timeout_s / max(live.detected_after_s, 1e-9):.1f}x longer")

    def ranks_frame(self) -> pd.DataFrame:
        """One row per rank: status, steps, median step time (ms), seconds it ran, error."""
        import pandas as pd

        return pd.DataFrame(
            {
                "rank": [r.rank for r in self.per_rank],
                "status": [r.status.value for r in self.per_rank],
                "steps": [r.steps for r in self.per_rank],
                "step_median_ms": [None if r.step_time_median_s is None else round(r.step_time_median_s * 1e3, 1) for r in self.per_rank],
                "ran_s": [None if r.wall_s is None else round(r.wall_s, 2) for r in self.per_rank],
                "error": [r.error or "" for r in self.per_rank],
            }
        ).set_index("rank")

    def summary_line(self) -> str:
        culprits = ",".join(map(str, self.culprit_ranks)) or "-"
        return (
            f"{self.scenario} [{self.variant}] outcome={self.outcome.value} "
            f"culprits={culprits} op={self.failed_op or '-'} "
            f"timeout={self.pg_timeout_s:g}s wall={self.wall_s:.1f}s"
        )

    def _repr_html_(self) -> str:
        colour = {"ok": "#2e7d32", "timeout": "#c62828", "error": "#ef6c00", "crashed": "#6a1b9a"}
        head = (
            f"<b>{html.escape(self.scenario)}</b> / <code>{html.escape(self.variant)}</code>: "
            f"<span style='color:{colour[self.outcome.value]};font-weight:bold'>{self.outcome.value}</span>"
            f" &nbsp; backend={self.backend}, world_size={self.world_size}, "
            f"pg timeout={self.pg_timeout_s:g} s, wall={self.wall_s:.1f} s"
        )
        if self.live_hang is not None:
            head += (
                f"<br>named live, before the timeout: culprit rank(s) <b>{list(self.live_hang.culprit_ranks)}</b> "
                f"in {html.escape(self.live_hang.op)}, {self.live_hang.detected_after_s:.1f} s after the others "
                f"started waiting (the timeout needed {self.pg_timeout_s:g} s)"
            )
        if not self.ok:
            agree = "agrees" if self.diagnosis_agrees else "DISAGREES"
            head += (
                f"<br>diagnosed culprit ranks: <b>{list(self.culprit_ranks)}</b>, failed op: "
                f"<b>{html.escape(str(self.failed_op))}</b> (ground truth {list(self.expected_culprits)}: {agree})"
            )
        rows = "".join(
            "<tr>"
            f"<td>{r.rank}</td><td>{r.status.value}</td><td>{r.steps}</td>"
            f"<td>{'' if r.step_time_median_s is None else f'{r.step_time_median_s * 1e3:.1f}'}</td>"
            f"<td style='text-align:left'>{html.escape((r.error or '')[:160])}</td>"
            "</tr>"
            for r in self.per_rank
        )
        table = (
            "<table><tr><th>rank</th><th>status</th><th>steps</th><th>step median (ms)</th>"
            f"<th>error</th></tr>{rows}</table>"
        )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return f"<div>{head}{table}{'<ul>' + notes + '</ul>' if notes else ''}</div>"
