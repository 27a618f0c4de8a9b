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
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter


class Figure(_MplFigure):
    """A matplotlib Figure that shows itself in Jupyter as a PNG, with or without pyplot or
    ``%matplotlib inline`` (a bare Figure in a fresh kernel would only print its repr)."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=90)
        return buf.getvalue()

__all__ = ["timeline", "step_and_collective_times", "bandwidth", "wait_per_step", "step_time_vs_length",
           "STATUS_COLOURS", "format_bytes"]

STATUS_COLOURS = {
    "ok": "#90a4ae",          # collective that completed: grey-blue
    "timeout": "#d32f2f",     # timed out on this rank: red
    "peer_closed": "#f57c00", # a peer gave up first: orange
    "error": "#7b1fa2",
    "running": "#000000",
    "crashed": "#000000",     # its process died inside it (rows read back from the rank's spill file)
}
REGION_COLOUR = "#43a047"     # compute regions (sample generation, log flush…): green
STEP_COLOUR = "#e3f2fd"       # training steps in the other plots' backgrounds: pale blue
COMPUTE_COLOUR = "#1565c0"    # timeline: time in a step outside collectives (computing): saturated blue
#: timeline fill of the time a rank spends inside a collective, mostly waiting for the others: pale,
#: so that the rank that does the work (saturated) is the most visible row; the edge keeps the status
WAIT_FILL = {
    "ok": "#dfe6ea",
    "timeout": "#ffcdd2",
    "peer_closed": "#ffe0b2",
    "error": "#e1bee7",
    "running": "#e0e0e0",
    "crashed": "#000000",
}
_CHAR_FRACTION = 0.0062       # width of one 7-pt character as a fraction of an 11-inch timeline panel


def _variants(df: pd.DataFrame, order: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(df["variant"])) if "variant" in df.columns else [""]
    return [v for v in order if v in present] if order else present


def _panel_title(ax, variant: str, variants: list[str], title: str | None, extra: str = "") -> None:  # noqa: ANN001
    """A panel's title, unless it would repeat the figure's (one variant, figure titled with it)."""
    if len(variants) == 1 and title and (not variant or variant in title):
        return
    ax.set_title((variant or "run") + extra, loc="left", fontsize=10, fontweight="bold")


def _timeout_label(ax, x: float, timeout_s: float, *, vertical: bool = True) -> None:  # noqa: ANN001
    """The group-timeout line's label, beside its line on a white patch, never struck through by it."""
    colour = STATUS_COLOURS["timeout"]
    if vertical:
        ax.annotate(f"group timeout ({timeout_s:g} s)", xy=(x, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-4, -2), textcoords="offset points", ha="right", va="top", fontsize=8, color=colour,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0}, zorder=5)
    else:
        ax.annotate(f"group timeout ({timeout_s:g} s)", xy=(0.0, x), xycoords=("axes fraction", "data"),
                    xytext=(4, 3), textcoords="offset points", ha="left", va="bottom", fontsize=8, color=colour,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0}, zorder=5)


def _failed_colour(d: pd.DataFrame) -> str:
    st = set(d.loc[d["kind"] == "collective", "status"].astype(str))
    if "timeout" in st:
        return STATUS_COLOURS["timeout"]
    if st & {"peer_closed", "error", "crashed"}:
        return STATUS_COLOURS["peer_closed"]
    return STATUS_COLOURS["ok"]


def timeline(df: pd.DataFrame, *, order: Sequence[str] | None = None, timeouts_s: dict[str, float] | None = None,
             title: str | None = None) -> Figure:
    """Per-rank timeline: one panel per variant, each zoomed to its own run (seconds), and with
    several variants an overview on top where every run shares one time axis (how long each took).

    In a rank's lane, saturated colour is work: blue for time in a training step outside
    collectives (computing), green for named compute regions. Pale colour is time inside a
    collective, mostly waiting for the others (edge: how it ended). So the rank the others wait for
    is the darkest row. ``timeouts_s`` (variant -> group timeout) draws the deadline of the first
    collective that failed, so one sees the waiting ranks give up exactly there.
    """
    if len(df) == 0:
        raise ValueError("empty trace: nothing to plot (did the run produce any rows?)")
    if "variant" not in df.columns:
        df = df.assign(variant="", t_enqueue_rel_ns=df["t_enqueue_ns"] - df["t_enqueue_ns"].min(),
                       t_end_rel_ns=df["t_end_ns"] - df["t_enqueue_ns"].min())
    variants = _variants(df, order)
    ranks = sorted(int(r) for r in df["rank"].unique())
    ends = df["t_end_rel_ns"].astype("float64").fillna(df["t_enqueue_rel_ns"].astype("float64")) / 1e9
    span = {v: float(np.nanmax(ends[df["variant"] == v])) for v in variants}
    overview = len(variants) > 1
    lane_h = 0.8 + 0.4 * len(ranks)
    heights = ([0.5 + 0.28 * len(variants)] if overview else []) + [lane_h] * len(variants)
    fig = Figure(figsize=(11, sum(heights) + 0.9), layout="constrained")
    axes = list(fig.subplots(len(heights), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0])
    if overview:
        ax0 = axes.pop(0)
        for i, v in enumerate(variants):
            ax0.barh(i, span[v], height=0.6, color=_failed_colour(df[df["variant"] == v]))
            ax0.text(span[v], i, f"  {span[v]:.2f} s", va="center", fontsize=8)
        ax0.set_yticks(range(len(variants)), variants)
        ax0.set_ylim(len(variants) - 0.4, -0.6)
        ax0.set_xlim(0, max(span.values()) * 1.12)
        ax0.set_xlabel("length of the run (s), every variant on the same axis")
        ax0.set_title("all runs on one time axis (red: timed out; orange: a rank failed or a peer closed; grey: ok)",
                      loc="left", fontsize=10)
        ax0.grid(axis="x", alpha=0.3)
    for ax, variant in zip(axes, variants):
        d = df[df["variant"] == variant]
        t_max = max(span[variant], 1e-6)
        t_right = t_max
        failed = d[(d["kind"] == "collective") & d["status"].isin(["timeout"])]
        deadline = None
        if timeouts_s and variant in timeouts_s and len(failed):
            deadline = float(failed["t_enqueue_rel_ns"].min()) / 1e9 + timeouts_s[variant]
            t_right = max(t_right, deadline)
        labels: list[tuple[int, int, float, float, str, str]] = []  # priority, rank, start, end, text, colour
        for kind in ("step", "collective", "region"):
            for _, r in d[d["kind"] == kind].iterrows():
                rank = int(r["rank"])
                start = float(r["t_enqueue_rel_ns"]) / 1e9
                end = float(r["t_end_rel_ns"]) / 1e9 if pd.notna(r["t_end_rel_ns"]) else t_max
                width = max(end - start, t_right * 0.002)
                status = str(r["status"])
                if kind in ("step", "region") and status == "error":  # the rank raised, outside collectives
                    ax.plot([end], [rank], marker="X", color=STATUS_COLOURS["error"], markersize=10, zorder=5,
                            markeredgecolor="white")
                if kind == "step":
                    ax.barh(rank, width, left=start, height=0.56, color=COMPUTE_COLOUR, edgecolor="white", linewidth=0.6)
                elif kind == "region":
                    # below the collectives: a collective inside a region (an evaluation's all_gather)
                    # is waiting, not work, and must show as such
                    ax.barh(rank, width, left=start, height=0.56, color=REGION_COLOUR, edgecolor="none", zorder=2)
                    labels.append((1, rank, start, end, str(r["name"]), "white"))
                else:
                    edge = STATUS_COLOURS.get(status, "#000")
                    ax.barh(rank, width, left=start, height=0.56, color=WAIT_FILL.get(status, "#e0e0e0"),
                            edgecolor=edge if status != "ok" else "none", linewidth=1.0, zorder=3)
                    if status in ("timeout", "peer_closed", "error", "crashed"):
                        ax.plot([end], [rank], marker="x", color="black", markersize=7, zorder=4)
                    colour = "white" if status == "crashed" else "#212121"
                    labels.append((0 if status != "ok" else 2, rank, start, end,
                                   f"{r['name']} (pg {r['pg']}, seq {r['seq']})", colour))
        placed: dict[int, list[tuple[float, float]]] = {}
        for _, rank, start, end, text, colour in sorted(labels, key=lambda x: (x[0], x[2])):
            need = (len(text) + 2) * _CHAR_FRACTION * t_right
            x0 = start + 0.005 * t_right
            if end - start < need or any(x0 < b and x0 + need > a for a, b in placed.get(rank, [])):
                continue
            placed.setdefault(rank, []).append((x0, x0 + need))
            ax.text(x0, rank, text, va="center", fontsize=7, color=colour, zorder=6, clip_on=True)
        if deadline is not None:
            ax.axvline(deadline, color=STATUS_COLOURS["timeout"], linestyle="--", linewidth=1, zorder=4)
            _timeout_label(ax, deadline, timeouts_s[variant])
        ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
        ax.set_ylim(ranks[-1] + 0.6, ranks[0] - 0.9)
        ax.set_xlim(0, t_right * 1.03)
        _panel_title(ax, variant, variants, title, f"  ({span[variant]:.2f} s)" if overview else "")
        ax.set_xlabel("time since the run's first event (s)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    kinds = set(df["kind"].astype(str))
    statuses = set(df.loc[df["kind"] == "collective", "status"].astype(str))
    entries = [
        ("step" in kinds, Patch(color=COMPUTE_COLOUR, label="computing (in a training step, outside collectives)")),
        ("region" in kinds, Patch(color=REGION_COLOUR, label="compute region (named, e.g. sample generation)")),
        ("ok" in statuses, Patch(facecolor=WAIT_FILL["ok"], label="in a collective (mostly waiting), completed")),
        ("timeout" in statuses, Patch(facecolor=WAIT_FILL["timeout"], edgecolor=STATUS_COLOURS["timeout"],
                                      label="in a collective, timed out")),
        ("peer_closed" in statuses, Patch(facecolor=WAIT_FILL["peer_closed"], edgecolor=STATUS_COLOURS["peer_closed"],
                                          label="in a collective, a peer closed")),
        ("error" in statuses, Patch(facecolor=WAIT_FILL["error"], edgecolor=STATUS_COLOURS["error"],
                                    label="in a collective, raised an error")),
        ("running" in statuses, Patch(facecolor=WAIT_FILL["running"], edgecolor="black",
                                      label="in a collective, still waiting when the record ends")),
        ("crashed" in statuses, Patch(color=STATUS_COLOURS["crashed"], label="in a collective when its process died")),
        (bool((df["kind"].isin(["step", "region"]) & (df["status"] == "error")).any()),
         Line2D([], [], color=STATUS_COLOURS["error"], marker="X", markersize=9, linestyle="none",
                label="the rank raised an error here (outside collectives)")),
        (bool(statuses & {"timeout", "peer_closed", "error", "crashed"}),
         Line2D([], [], color="black", marker="x", linestyle="none", label="where the collective failed")),
    ]
    handles = [h for present, h in entries if present]
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
    ax2.yaxis.set_minor_formatter(NullFormatter())  # a short log range labels every minor tick otherwise
    ax1.set_title("step time per rank", loc="left", fontsize=10)
    ax2.set_title("collective latency per rank (waiting included)", loc="left", fontsize=10)
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(variants), 6), fontsize=8,
               frameon=False, title="variant", title_fontsize=8)
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
        ax1.annotate(f"host memory copy {host_copy_gbps:.2f} GB/s", xy=(0.0, host_copy_gbps),
                     xycoords=("axes fraction", "data"), xytext=(4, 3), textcoords="offset points", fontsize=8,
                     va="bottom", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(_Pow4Locator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: format_bytes(x)))
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes, powers of 2)")
        ax.grid(alpha=0.3, which="both")
    ax1.set_ylabel("bus bandwidth (GB/s)")
    ax2.set_ylabel("time per call (µs)")
    ax1.set_title("bus bandwidth (nccl-tests busbw)", loc="left", fontsize=10)
    ax2.set_title("latency", loc="left", fontsize=10)
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def format_bytes(n: float) -> str:
    """``1024 -> '1 KiB'``, ``48 -> '48 B'``: sizes as a reader says them.

    >>> format_bytes(4), format_bytes(65536), format_bytes(64 * 2**20)
    ('4 B', '64 KiB', '64 MiB')
    """
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


class _Pow4Locator(MaxNLocator):
    """Ticks at 4 B, 64 B, 1 KiB, …: every power of 16 and the powers of 4 between when few."""

    def tick_values(self, vmin: float, vmax: float) -> np.ndarray:
        lo, hi = int(np.floor(np.log2(max(vmin, 1)))), int(np.ceil(np.log2(max(vmax, 1))))
        step = 2 if hi - lo <= 12 else 4
        return np.array([2.0 ** e for e in range(lo - lo % 2, hi + 1, step)])


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
        _panel_title(ax, variant, variants, title)
        ax.grid(alpha=0.3, which="both")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles = [Line2D([], [], color=colours[i % len(colours)], marker="o", markersize=3, label=f"rank {r}")
               for i, r in enumerate(ranks)]
    handles.append(Line2D([], [], color="black", marker="x", markersize=8, linestyle="none",
                          label="step whose collective failed"))
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    axes[-1].set_xlabel("training step")
    hint = "the rank the others wait for spends the least time in collectives: its line is the lowest"
    fig.suptitle(f"{title}\n{hint}" if title else hint, fontsize=10)
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
            _timeout_label(ax, timeouts_s[variant], timeouts_s[variant], vertical=False)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator([2 ** e for e in range(3, 16)]))  # 8, 16, … tokens
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        _panel_title(ax, variant, variants, title)
        ax.grid(alpha=0.3, which="both")
    for ax in axes[len(variants):]:
        ax.set_visible(False)
    for ax in axes[(nrows - 1) * ncols:]:
        ax.set_xlabel("padded sequence length of the rank's batch (tokens)")
    for ax in axes[::ncols]:
        ax.set_ylabel("time per step (s)")
    handles = [Line2D([], [], color=colours[i % len(colours)], marker="s", markersize=7, linestyle="none",
                      label=f"rank {r}") for i, r in enumerate(ranks)]
    handles += [
        Line2D([], [], color="#555", marker="o", markersize=6, linestyle="none",
               label="computing (outside collectives)"),
        Line2D([], [], markerfacecolor="none", markeredgecolor="#555", marker="^", markersize=7, linestyle="none",
               label="waiting in collectives"),
        Line2D([], [], color="black", marker="x", markersize=7, linestyle="none", label="step that failed"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig
