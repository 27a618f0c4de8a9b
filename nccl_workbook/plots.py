"""Trace frames -> matplotlib Figures. Pure functions: no pyplot state, no analysis, no display.

- :func:`timeline`: one panel per variant, one lane per rank, on a shared time axis (s from the
  run's first event): compute regions, time inside collectives (a collective on a rank is mostly
  waiting for the last rank), and how each collective ended (timeout, peer closed).
- :func:`step_and_collective_times`: per rank and variant, the median step time and the longest
  collective (ms, log scale), broken next to each fix.
- :func:`wait_per_step`: per variant, each rank's time inside collectives in each training step
  (ms, log scale): who waits for whom, step by step.
- :func:`step_time_vs_length`: per variant, each rank's compute and waiting time per step against
  the padded sequence length of its batch (s and tokens, log-log), with the group timeout.

All take the frame from :func:`nccl_workbook.runner.combined_trace` (a ``variant`` column plus
``t_enqueue_rel_ns``/``t_end_rel_ns``) and return a :class:`Figure` (a matplotlib Figure that
renders itself as a PNG in Jupyter).
"""

from __future__ import annotations

from collections.abc import Sequence

import io

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as _MplFigure
from matplotlib.patches import Patch


class Figure(_MplFigure):
    """A matplotlib Figure that shows itself in Jupyter as a PNG, with or without pyplot or
    ``%matplotlib inline`` (a bare Figure in a fresh kernel would only print its repr)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=90)
        return buf.getvalue()

__all__ = ["timeline", "step_and_collective_times", "bandwidth", "wait_per_step", "step_time_vs_length",
           "STATUS_COLOURS"]

STATUS_COLOURS = {
    "ok": "#90a4ae",          # collective that completed: grey-blue
    "timeout": "#d32f2f",     # timed out on this rank: red
    "peer_closed": "#f57c00", # a peer gave up first: orange
    "error": "#7b1fa2",
    "running": "#000000",
    "crashed": "#000000",     # its process died inside it (rows read back from the rank's spill file)
}
REGION_COLOUR = "#43a047"     # compute regions (sample generation, log flush…): green
STEP_COLOUR = "#e3f2fd"       # training steps: pale blue background


def _variants(df: pd.DataFrame, order: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(df["variant"])) if "variant" in df.columns else [""]
    return [v for v in order if v in present] if order else present


def timeline(df: pd.DataFrame, *, order: Sequence[str] | None = None, timeouts_s: dict[str, float] | None = None,
             title: str | None = None) -> Figure:
    """Per-rank timeline, one panel per variant on a shared x axis (seconds).

    ``timeouts_s`` (variant -> group timeout) draws the deadline of the first collective that
    failed, so one sees the waiting ranks give up exactly there.
    """
    if len(df) == 0:
        raise ValueError("empty trace: nothing to plot (did the run produce any rows?)")
    if "variant" not in df.columns:
        df = df.assign(variant="", t_enqueue_rel_ns=df["t_enqueue_ns"] - df["t_enqueue_ns"].min(),
                       t_end_rel_ns=df["t_end_ns"] - df["t_enqueue_ns"].min())
    variants = _variants(df, order)
    ranks = sorted(int(r) for r in df["rank"].unique())
    fig = Figure(figsize=(11, 1.0 + 0.42 * len(ranks) * len(variants) + 0.5 * len(variants)), layout="constrained")
    axes = fig.subplots(len(variants), 1, sharex=True, squeeze=False)[:, 0]
    t_max = float(np.nanmax(df["t_end_rel_ns"].astype("float64").fillna(df["t_enqueue_rel_ns"].astype("float64")))) / 1e9
    for ax, variant in zip(axes, variants):
        d = df[df["variant"] == variant]
        for kind, height, colour_of in (
            ("step", 0.8, lambda r: STEP_COLOUR),
            ("region", 0.5, lambda r: REGION_COLOUR),
            ("collective", 0.5, lambda r: STATUS_COLOURS.get(str(r["status"]), "#000")),
        ):
            rows = d[d["kind"] == kind]
            for _, r in rows.iterrows():
                start = float(r["t_enqueue_rel_ns"]) / 1e9
                end = float(r["t_end_rel_ns"]) / 1e9 if pd.notna(r["t_end_rel_ns"]) else t_max
                ax.barh(int(r["rank"]), max(end - start, t_max * 0.002), left=start, height=height,
                        color=colour_of(r), edgecolor="none")
                if kind == "collective" and r["status"] in ("timeout", "peer_closed", "error", "crashed"):
                    ax.plot([end], [int(r["rank"])], marker="x", color="black", markersize=7)
                if kind != "step" and end - start > 0.08 * t_max:
                    label = str(r["name"]) if kind == "region" else f"{r['name']} (pg {r['pg']}, seq {r['seq']})"
                    ax.text(start + 0.01 * t_max, int(r["rank"]), label, va="center", fontsize=7, color="white")
        failed = d[(d["kind"] == "collective") & d["status"].isin(["timeout"])]
        if timeouts_s and variant in timeouts_s and len(failed):
            t0 = float(failed["t_enqueue_rel_ns"].min()) / 1e9
            ax.axvline(t0 + timeouts_s[variant], color=STATUS_COLOURS["timeout"], linestyle="--", linewidth=1)
            ax.text(t0 + timeouts_s[variant], ranks[-1] + 0.45, f" timeout ({timeouts_s[variant]:g} s)",
                    color=STATUS_COLOURS["timeout"], fontsize=8, va="bottom")
        ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
        ax.set_ylim(ranks[-1] + 0.9, ranks[0] - 0.6)
        ax.set_title(variant or "run", loc="left", fontsize=10, fontweight="bold")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("time since the run's first event (s)")
    handles = [
        Patch(color=STEP_COLOUR, label="training step"),
        Patch(color=REGION_COLOUR, label="compute region (e.g. sample generation)"),
        Patch(color=STATUS_COLOURS["ok"], label="in a collective (mostly waiting), completed"),
        Patch(color=STATUS_COLOURS["timeout"], label="in a collective, timed out"),
        Patch(color=STATUS_COLOURS["peer_closed"], label="in a collective, peer closed"),
    ]
    if (df["status"] == "crashed").any():
        handles.append(Patch(color=STATUS_COLOURS["crashed"], label="in a collective when its process died"))
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def step_and_collective_times(df: pd.DataFrame, *, order: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Two panels, grouped bars per rank and variant: median training-step time (ms) and the
    longest time a rank spent in one collective (ms, log scale: waits of seconds next to
    transfers of milliseconds)."""
    if len(df) == 0:
        raise ValueError("empty trace: nothing to plot")
    if "variant" not in df.columns:
        df = df.assign(variant="")
    variants = _variants(df, order)
    ranks = sorted(int(r) for r in df["rank"].unique())
    dur_ms = (df["t_end_ns"] - df["t_enqueue_ns"]).astype("float64") / 1e6
    df = df.assign(duration_ms=dur_ms)
    steps = df[(df["kind"] == "step") & (df["status"] == "ok")].groupby(["variant", "rank"])["duration_ms"].median()
    colls = df[df["kind"] == "collective"].groupby(["variant", "rank"])["duration_ms"].max()
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    width = 0.8 / max(len(variants), 1)
    x = np.arange(len(ranks))
    cmap = ["#c62828", "#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037"]
    for i, v in enumerate(variants):
        for ax, series in ((ax1, steps), (ax2, colls)):
            vals = [float(series.get((v, r), np.nan)) for r in ranks]
            ax.bar(x + (i - (len(variants) - 1) / 2) * width, vals, width, label=v or "run", color=cmap[i % len(cmap)])
    for ax, label in ((ax1, "median training-step time (ms)"), (ax2, "longest time in one collective (ms, log)")):
        ax.set_xticks(x, [f"rank {r}" for r in ranks])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3, which="both")
    ax2.set_yscale("log")
    ax1.set_title("step time per rank", loc="left", fontsize=10)
    ax2.set_title("collective latency per rank (waiting included)", loc="left", fontsize=10)
    ax2.legend(fontsize=8, title="variant", title_fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def bandwidth(df: pd.DataFrame, *, host_copy_gbps: float | None = None, title: str | None = None) -> Figure:
    """The bandwidth sweep (``nccl_workbook.health.sweep(...).frame``): bus bandwidth (GB/s) and
    time per call (µs) against message size, one line per op, both log-log; the host's measured
    memory-copy bandwidth as a dashed line, the ceiling on one machine."""
    if len(df) == 0:
        raise ValueError("empty sweep: nothing to plot")
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    for op, g in df.groupby("op", sort=False):
        g = g.sort_values("bytes")
        ax1.plot(g["bytes"], g["busbw_gbps"], marker="o", markersize=3, label=op)
        ax2.plot(g["bytes"], g["time_us"], marker="o", markersize=3, label=op)
    if host_copy_gbps:
        ax1.axhline(host_copy_gbps, color="black", linestyle="--", linewidth=1)
        ax1.text(df["bytes"].min(), host_copy_gbps * 1.15, f"host memory copy {host_copy_gbps:.2f} GB/s", fontsize=8)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.grid(alpha=0.3, which="both")
    ax1.set_ylabel("bus bandwidth (GB/s)")
    ax2.set_ylabel("time per call (µs)")
    ax1.set_title("bus bandwidth (nccl-tests busbw)", loc="left", fontsize=10)
    ax2.set_title("latency", loc="left", fontsize=10)
    ax2.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def wait_per_step(df: pd.DataFrame, *, order: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """One panel per variant: for every rank, the time it spent inside collectives during each
    training step (ms, log scale; the time of the collectives that failed included, up to their
    failure), against the step index. A rank that others wait for sits at the bottom; the
    waiting ranks' lines rise by exactly the extra work it does. A failed step is marked with x.
    """
    if len(df) == 0:
        raise ValueError("empty trace: nothing to plot")
    if "variant" not in df.columns:
        df = df.assign(variant="")
    variants = _variants(df, order)
    coll = df[(df["kind"] == "collective") & df["step"].notna()]
    if len(coll) == 0:
        raise ValueError("no collectives inside training steps: nothing to plot (are steps traced?)")
    end = coll["t_end_ns"].astype("float64")
    dur_ms = (end - coll["t_enqueue_ns"].astype("float64")) / 1e6
    coll = coll.assign(wait_ms=dur_ms.clip(lower=1e-3), failed=coll["status"] != "ok")
    per = coll.groupby(["variant", "rank", "step"]).agg(wait_ms=("wait_ms", "sum"), failed=("failed", "any")).reset_index()
    ranks = sorted(int(r) for r in per["rank"].unique())
    fig = Figure(figsize=(11, 1.2 + 2.2 * len(variants)), layout="constrained")
    axes = fig.subplots(len(variants), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    colours = ["#c62828", "#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#455a64"]
    for ax, variant in zip(axes, variants):
        d = per[per["variant"] == variant]
        for i, r in enumerate(ranks):
            g = d[d["rank"] == r].sort_values("step")
            if len(g) == 0:
                continue
            colour = colours[i % len(colours)]
            ax.plot(g["step"].astype(int), g["wait_ms"], marker="o", markersize=3, color=colour, label=f"rank {r}")
            bad = g[g["failed"]]
            ax.plot(bad["step"].astype(int), bad["wait_ms"], linestyle="none", marker="x", markersize=9, color="black")
        ax.set_yscale("log")
        ax.set_ylabel("in collectives (ms)")
        ax.set_title(variant or "run", loc="left", fontsize=10, fontweight="bold")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8, ncols=len(ranks), loc="upper left")
    axes[-1].set_xlabel("training step")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def step_time_vs_length(df: pd.DataFrame, *, order: Sequence[str] | None = None,
                        timeouts_s: dict[str, float] | None = None, title: str | None = None) -> Figure:
    """One panel per variant: for every rank and step, the time spent computing (outside
    collectives, filled circles) and waiting inside collectives (open triangles), in seconds,
    against the padded sequence length of the rank's batch in that step (tokens); log-log axes.
    Steps that failed are marked with x; ``timeouts_s`` (variant -> s) draws the group timeout.

    ``df`` has one row per (variant, rank, step) with columns ``variant``, ``rank``,
    ``padded_len``, ``compute_s``, ``wait_s`` and ``status`` (e.g. from
    :func:`nccl_workbook.scenarios.slow_rank_dynamic_shapes.step_breakdown`). The timeout bounds the
    *wait*: a step may compute for longer than the timeout if every rank does the same.
    """
    needed = {"variant", "rank", "padded_len", "compute_s", "wait_s", "status"}
    if len(df) == 0:
        raise ValueError("empty frame: nothing to plot")
    missing = needed - set(df.columns)
    if missing:
        raise ValueError(f"step_time_vs_length needs columns {sorted(needed)}; missing {sorted(missing)}")
    variants = _variants(df, order)
    ranks = sorted(int(r) for r in df["rank"].unique())
    colours = ["#c62828", "#1565c0", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037", "#455a64"]
    ncols = min(2, len(variants))
    nrows = (len(variants) + ncols - 1) // ncols
    fig = Figure(figsize=(11, 0.6 + 3.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    floor = 1e-3  # seconds: a wait of 0 would vanish on a log axis
    for ax, variant in zip(axes, variants):
        d = df[df["variant"] == variant]
        for i, r in enumerate(ranks):
            g = d[d["rank"] == r]
            colour = colours[i % len(colours)]
            ax.scatter(g["padded_len"], g["compute_s"].clip(lower=floor), color=colour, marker="o", s=28,
                       label=f"rank {r}")
            ax.scatter(g["padded_len"], g["wait_s"].clip(lower=floor), facecolors="none", edgecolors=colour,
                       marker="^", s=34)
            bad = g[g["status"] != "ok"]
            ax.scatter(bad["padded_len"], bad["wait_s"].clip(lower=floor), color="black", marker="x", s=60, zorder=3)
        if timeouts_s and variant in timeouts_s:
            ax.axhline(timeouts_s[variant], color=STATUS_COLOURS["timeout"], linestyle="--", linewidth=1)
            ax.text(ax.get_xlim()[0], timeouts_s[variant], f" group timeout ({timeouts_s[variant]:g} s)",
                    color=STATUS_COLOURS["timeout"], fontsize=8, va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(variant or "run", loc="left", fontsize=10, fontweight="bold")
        ax.grid(alpha=0.3, which="both")
    for ax in axes[len(variants):]:
        ax.set_visible(False)
    for ax in axes[(nrows - 1) * ncols:]:
        ax.set_xlabel("padded sequence length of the rank's batch (tokens)")
    for ax in axes[::ncols]:
        ax.set_ylabel("time per step (s)")
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [
        Patch(facecolor="#777", label="filled circle: computing (outside collectives)"),
        Patch(facecolor="white", edgecolor="#777", label="open triangle: waiting in collectives"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(ranks) + 2, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
