"""Which ranks reported what: events frame -> matplotlib Figure (pure function, no display).

One row per rank (y), log position (x, the line number), one marker per event coloured by kind.
Ranks of the job that reported no failure (``ranks_missing``) are drawn as a shaded row labelled
"(missing)", so a silent rank stands out as clearly as a loud one; culprit ranks (from the top
finding) get a red, bold label.

Usage::

    fig = plot_rank_events(report.events_frame(), missing_ranks=(0,), culprit_ranks=(0,))
    fig.savefig("ranks.png")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["plot_rank_events", "KIND_COLORS"]

#: kind -> colour; failure kinds are warm, context kinds grey
KIND_COLORS: dict[str, str] = {
    "collective_timeout": "#d62728",
    "pg_status": "#bbbbbb",
    "watchdog_stuck": "#8c564b",
    "heartbeat": "#8c564b",
    "collective_mismatch": "#9467bd",
    "monitored_barrier": "#e377c2",
    "peer_closed": "#ff7f0e",
    "store_timeout": "#17becf",
    "dataloader_timeout": "#2ca02c",
    "dataloader_worker_died": "#2ca02c",
    "too_many_open_files": "#bcbd22",
    "nccl_error": "#1f77b4",
    "duplicate_gpu": "#1f77b4",
    "cuda_error": "#1f77b4",
    "unused_parameters": "#9467bd",
    "flight_recorder": "#999999",
    "python_exception": "#000000",
    "process_exit": "#cccccc",
}


def plot_rank_events(
    frame: pd.DataFrame,
    *,
    missing_ranks: tuple[int, ...] | list[int] = (),
    culprit_ranks: tuple[int, ...] | list[int] = (),
    title: str = "Which ranks reported what",
) -> Figure:
    """Events frame (from :func:`events_frame`) -> Figure with one row per rank.

    Events without a rank are drawn on a row labelled ``?``. An empty frame gives a figure that
    says there is nothing to plot.
    """
    from matplotlib.figure import Figure

    ranks = sorted({int(r) for r in frame["rank"].dropna()} | {int(r) for r in missing_ranks}) if len(frame) else \
        sorted(int(r) for r in missing_ranks)
    has_unranked = bool(len(frame)) and bool(frame["rank"].isna().any())
    rows = [str(r) for r in ranks] + (["?"] if has_unranked else [])
    position = {label: i for i, label in enumerate(rows)}
    height = min(1.0 + 0.32 * max(len(rows), 1), 12.0)
    fig = Figure(figsize=(8.0, height), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel("line in the log")
    ax.set_ylabel("rank")
    if not rows:
        ax.text(0.5, 0.5, "no events to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
        return fig
    culprits = {str(r) for r in culprit_ranks}
    for kind, group in frame.groupby(frame["kind"].astype(str), sort=True):
        ys = [position["?" if r is None or r != r else str(int(r))] for r in group["rank"].astype(object).where(
            group["rank"].notna(), None)]
        ax.scatter(group["line_no"].astype(float), ys, s=28, color=KIND_COLORS.get(kind, "#444444"),
                   label=kind, edgecolors="none", zorder=3)
    silent = {str(r) for r in missing_ranks}
    for label in silent:
        ax.axhspan(position[label] - 0.4, position[label] + 0.4, color="#fdd", zorder=1, lw=0)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{label} (missing)" if label in silent else label for label in rows])
    for tick, label in zip(ax.get_yticklabels(), rows):
        if label in culprits:
            tick.set_color("#d62728")
            tick.set_fontweight("bold")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    if len(frame):
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False, title="kind")
    return fig
