"""ipywidgets panels that wire controls to :mod:`nccl_workbook.runner` and :mod:`nccl_workbook.plots`.

:class:`ScenarioPanel` shows controls (world size, group timeout, one or more scenario parameters,
the variants to run, whether to draw plots), a Run button, a progress bar with a status line, and
one output area where each run's results and the side-by-side plots appear:

- while a run goes: the button turns into "Running…", the bar fills as variants and ranks finish,
  the status line says which variant runs, for how long and how many ranks are done, and a hang
  named live (:mod:`nccl_workbook.live`) is shown at once, before the group's timeout fires;
- after it: a summary table (one row per variant: outcome, culprit ranks, failed op, agreement with
  the ground truth, how soon the hang was named live), the per-rank details of each variant (open
  for failed runs, folded for clean ones, with every rank's stack when a hang was named), and the
  plots as images.

Expected outcomes are results: a timeout is a row in the table, never a stack trace. A run that
cannot start (cluster stopped, no variant ticked, invalid settings) or that the cluster cannot
complete shows a message in the panel and returns what it has; ``run()`` never raises for these.

``panel.run()`` does exactly what the button does, with the controls' current values, so a notebook
(and nbval) can run the defaults without a click.

Usage::

    panel = ScenarioPanel(cluster, "rank0-work-before-barrier",
                          knobs={"seconds_per_sample": ("work per sample (s)", 0.1, 2.0, 0.05)})
    panel            # display it
    panel.run()      # same as pressing Run
    panel.results    # list[RunResult] of the last run
    panel.settings() # the controls' values, as keyword arguments for run_scenario / run_variants

Stored outputs: displayed, the panel emits the live widget view AND a static HTML snapshot of its
last results (``text/html``: the same tables and plots), and a one-line ``text/plain``. A reader
without a kernel (GitHub, nbviewer, a notebook opened before Run) sees the snapshot, never the
widget's Python repr; each ``run()`` refreshes it in place (a display id, as nbclient and JupyterLab
update it).
"""

from __future__ import annotations

import base64
import html
import io
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from nccl_workbook.render import results_html, summary_line
from nccl_workbook.results import RunResult
from nccl_workbook.runner import combined_trace, run_scenario
from nccl_workbook.scenarios import get_scenario

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from nccl_workbook.cluster import RankCluster
    from nccl_workbook.observer import HangReport
    from nccl_workbook.scenarios.base import Scenario

__all__ = ["ScenarioPanel", "SnapshotDisplay", "clean_float", "figure_png"]

#: knob name -> (label, min, max, step)
Knobs = Mapping[str, tuple[str, float, float, float]]

_LEVEL_COLOUR = {"ok": "#2e7d32", "info": "#37474f", "live": "#e65100", "warn": "#c62828"}
_PLOT_DPI = 80


# -- pure helpers (tested without a browser) -------------------------------------------------------
def figure_png(fig: Figure, dpi: float | None = None) -> bytes:
    """A matplotlib Figure as PNG bytes (no pyplot involved)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi or fig.dpi, bbox_inches="tight")
    return buf.getvalue()


def clean_float(value: float) -> float:
    """A slider value without the float noise a browser adds: JupyterLab's slider sends back
    ``2.9999999999999996`` for a 3.0 it was given (measured, ipywidgets 8.1 in Chromium, after
    another slider of the same panel was edited). Rounded to 9 decimals, far below any step.

    >>> clean_float(2.9999999999999996), clean_float(0.1)
    (3.0, 0.1)
    """
    return round(float(value), 9)


def _snap_float(change: dict[str, Any]) -> None:
    """Observer: replace a slider's noisy value by :func:`clean_float` of it (once: the clean value
    is its own fix point), so ``slider.value`` and everything computed from it stay exact."""
    clean = clean_float(change["new"])
    if clean != change["new"]:
        change["owner"].value = clean


def _bundle(data: dict[str, str]) -> dict[str, Any]:
    return {"output_type": "display_data", "data": data, "metadata": {}}


class _LogToPanel(logging.Handler):
    """Collects the package's warnings during a panel run (instead of stderr noise in the cell)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# -- the panel -------------------------------------------------------------------------------------
class SnapshotDisplay:
    """Mixin for a panel (an ipywidgets box): displayed, it emits the live widget view AND a static
    HTML snapshot (``snapshot_html()``) and one line of text (``text_plain()``), so a stored notebook
    shows the snapshot wherever there is no kernel, never the widget's Python repr; ``_refresh_snapshot()``
    after a run updates that same output in place."""

    _display_id: str | None = None

    def snapshot_html(self) -> str:  # pragma: no cover - every panel defines it
        raise NotImplementedError

    def text_plain(self) -> str:  # pragma: no cover - every panel defines it
        raise NotImplementedError

    def _mimebundle(self) -> dict[str, Any]:
        data = dict(super()._repr_mimebundle_() or {})  # type: ignore[misc]
        data["text/html"] = self.snapshot_html()
        data["text/plain"] = self.text_plain()
        return data

    def _ipython_display_(self) -> None:
        from IPython.display import display

        self._display_id = self._display_id or uuid.uuid4().hex
        display(self._mimebundle(), raw=True, display_id=self._display_id)

    def _refresh_snapshot(self) -> None:
        if self._display_id is None:
            return
        try:
            from IPython.display import update_display

            update_display(self._mimebundle(), raw=True, display_id=self._display_id)
        except Exception as e:  # noqa: BLE001 - a stale snapshot is no reason to fail a run
            logging.getLogger(__name__).debug("snapshot not refreshed: %s", e)


class ScenarioPanel(SnapshotDisplay, w.VBox):
    """Controls + Run + progress + results and plots for one scenario; see the module docstring."""

    def __init__(self, cluster: RankCluster, scenario_id: str, *, knobs: Knobs | None = None,
                 variants: list[str] | None = None, plots: bool = True) -> None:
        self.cluster = cluster
        self.scenario: Scenario = get_scenario(scenario_id)
        self.results: list[RunResult] = []
        self._pngs: list[tuple[str, str]] = []   # (name, base64 PNG) of the last plots shown
        defaults = self.scenario.params_type()
        style = {"description_width": "170px"}
        layout = w.Layout(width="480px")
        self.world_size = w.IntSlider(value=min(4, cluster.n_ranks), min=2, max=max(2, cluster.n_ranks),
                                      description="world size (ranks)", style=style, layout=layout)
        self.timeout = w.FloatSlider(value=self.scenario.default_timeout_s, min=0.5, max=30, step=0.5,
                                     description="group timeout (s)", style=style, layout=layout)
        self.knobs: dict[str, w.FloatSlider | w.IntSlider] = {}
        for name, (label, lo, hi, step) in (knobs or {}).items():
            value = getattr(defaults, name)
            cls = w.IntSlider if isinstance(value, int) and not isinstance(value, bool) else w.FloatSlider
            self.knobs[name] = cls(value=value, min=lo, max=hi, step=step, description=label, style=style, layout=layout)
        for slider in (self.timeout, *self.knobs.values()):
            if isinstance(slider, w.FloatSlider):
                slider.observe(_snap_float, names="value")
        chosen = variants or self.scenario.variant_names
        self.variant_boxes = {
            v.name: w.Checkbox(value=v.name in chosen, description=v.name, indent=False, tooltip=v.description,
                               layout=w.Layout(width="auto", margin="0 12px 0 0"))
            for v in self.scenario.variants
        }
        self.show_plots = w.Checkbox(value=plots, description="draw plots", indent=False,
                                     tooltip="timeline and step/collective times of the runs, side by side",
                                     layout=w.Layout(width="auto"))
        self.button = w.Button(description="Run", button_style="primary", icon="play",
                               tooltip="run the ticked variants with these settings",
                               layout=w.Layout(width="120px"))
        self.button.on_click(lambda _: self.run())
        self.progress = w.FloatProgress(value=0, min=0, max=1, layout=w.Layout(width="240px", margin="0 16px"))
        self.status = w.HTML(self._status_html("ready: press Run", "info"))
        self.output = w.Output(layout=w.Layout(width="100%"))
        def label(text: str = "") -> w.HTML:  # right-aligned like the sliders' descriptions
            return w.HTML(f"<div style='text-align:right;padding-right:8px'>{text}</div>",
                          layout=w.Layout(width="170px", margin="0 4px 0 2px"))

        super().__init__([
            w.HTML(f"<b>{html.escape(self.scenario.title)}</b> &nbsp;<code>{html.escape(self.scenario.id)}</code>"
                   f"<br><span style='color:#555'>{html.escape(self.scenario.symptom)}</span>"),
            self.world_size, self.timeout, *self.knobs.values(),
            w.HBox([label("variants"), *self.variant_boxes.values()], layout=w.Layout(align_items="center")),
            w.HBox([label(), self.button, self.progress, self.show_plots], layout=w.Layout(align_items="center")),
            w.HBox([label(), self.status]),
            self.output,
        ], layout=w.Layout(width="100%"))

    # -- how it is stored in a notebook ---------------------------------------------------------
    def snapshot_html(self) -> str:
        """A static picture of the panel: title, the settings of the last run, its results table
        and plots (no controls: those need a running kernel)."""
        head = (f"<div><b>{html.escape(self.scenario.title)}</b> &nbsp;<code>{html.escape(self.scenario.id)}</code>"
                f"<br><span style='color:#555'>{html.escape(self.scenario.symptom)}</span></div>")
        if not self.results:
            return head + ("<p style='color:#555'><i>Scenario panel: run the notebook to get its controls "
                           "(world size, group timeout, the variants, Run).</i></p>")
        used = ", ".join(f"{html.escape(k)}={v:g}" if isinstance(v, float) else f"{html.escape(k)}={v}"
                         for k, v in self.settings().items())
        imgs = "".join(f"<img alt='{html.escape(name)}' style='max-width:100%' src='data:image/png;base64,{png}'/>"
                       for name, png in self._pngs)
        return (head + f"<p style='color:#555'><i>Snapshot of the last run ({used}); run the notebook for "
                f"the live panel.</i></p>" + results_html(self.results) + imgs)

    def text_plain(self) -> str:
        return f"<ScenarioPanel {self.scenario.id}: " + ("; ".join(summary_line(r) for r in self.results) or "not run yet") + ">"

    def settings(self) -> dict[str, object]:
        """The controls' current values as keyword arguments for ``run_scenario``/``run_variants``,
        so later cells run the fixes with whatever the user chose here."""
        return {"world_size": self.world_size.value, "timeout_s": clean_float(self.timeout.value),
                **{k: clean_float(s.value) if isinstance(s.value, float) else s.value for k, s in self.knobs.items()}}

    # -- the one action --------------------------------------------------------------------------
    def run(self) -> list[RunResult]:
        """Run the ticked variants with the controls' values; show results and plots. Never raises
        for an expected outcome, a stopped cluster or a failed run: the panel says what happened."""
        variants = [v for v, box in self.variant_boxes.items() if box.value]
        self.output.outputs = ()
        self.results = []
        self.progress.value, self.progress.bar_style = 0, ""
        if not variants:
            self._say("Tick at least one variant, then press Run.", "warn")
            return []
        if not self.cluster.running:
            self._say("The cluster is not running: run the cell that starts it "
                      "(<code>cluster = RankCluster(n_ranks=4).start()</code>), then press Run again.", "warn")
            return []
        settings = self.settings()
        catcher = _LogToPanel()
        pkg_log = logging.getLogger("nccl_workbook")
        propagate = pkg_log.propagate
        pkg_log.addHandler(catcher)
        pkg_log.propagate = False
        self._busy(True)
        t0 = time.perf_counter()
        try:
            for i, v in enumerate(variants):
                if not self._run_one(i, v, variants, settings):
                    return self.results
            failed = [r.variant for r in self.results if not r.ok]
            self.progress.value = 1
            self.progress.bar_style = "warning" if failed else "success"
            summary = f"{len(self.results)} run(s) in {time.perf_counter() - t0:.1f} s; " + (
                f"not ok: {', '.join(failed)} (a timeout is a result: see below)" if failed else "all ok")
            if self.show_plots.value:
                self._say(summary + "; drawing the plots…", "info")
                self._show(plots=True)
            self._say(summary, "info" if failed else "ok")
        except Exception as e:  # noqa: BLE001 - the cluster failed: say so, no traceback
            self.progress.bar_style = "danger"
            self._say(f"The run could not complete: {html.escape(type(e).__name__)}: {html.escape(str(e))[:500]}. "
                      "If the cluster is broken, restart it: <code>cluster.stop(); cluster.start()</code>.", "warn")
        except KeyboardInterrupt:
            self.progress.bar_style = "danger"
            self._say("Interrupted. Ranks still inside a collective finish at their group timeout; "
                      "the next run replaces engines that do not answer.", "warn")
            raise
        finally:
            pkg_log.removeHandler(catcher)
            pkg_log.propagate = propagate
            self._busy(False)
            self._refresh_snapshot()
        return self.results

    def _run_one(self, i: int, variant: str, variants: list[str], settings: dict[str, object]) -> bool:
        """One variant: run it, show the results so far. False when it could not be run."""
        n = len(variants)
        live: list[str] = []

        def progress(elapsed: float, done: int, total: int) -> None:
            self.progress.value = (i + done / max(total, 1)) / n
            msg = (f"running <code>{html.escape(variant)}</code> ({i + 1} of {n}): {elapsed:.1f} s, "
                   f"{done} of {total} ranks finished")
            self._say(msg + (f"<br>{live[0]}" if live else ""), "live" if live else "info")

        def on_hang(h: HangReport) -> None:
            live.append(f"suspected hang, named live: {html.escape(h.message)} "
                        f"(the group timeout is {self.timeout.value:g} s)")

        try:
            r = run_scenario(self.cluster, self.scenario.id, variant, progress=progress, on_hang=on_hang, **settings)
        except (ValueError, KeyError) as e:
            self.progress.bar_style = "danger"
            self._say(f"Cannot run <code>{html.escape(variant)}</code> with these settings: "
                      f"{html.escape(str(e.args[0] if e.args else e))}", "warn")
            return False
        self.results.append(r)
        self._show(plots=False)
        return True

    def _show(self, *, plots: bool) -> None:
        """(Re)draw the output in one go: results table and details, then the plots if asked for.
        Sets the Output widget's ``outputs`` directly, so it works from a button click, a cell, or
        plain Python (tests), and never flickers."""
        bundles = [_bundle({"text/html": results_html(self.results),
                            "text/plain": "\n".join(summary_line(r) for r in self.results)})]
        self._pngs = []
        if plots:
            from nccl_workbook import plots as plotting

            df = combined_trace(self.results)
            if len(df):
                timeouts = {r.variant: r.pg_timeout_s for r in self.results}
                title = self.scenario.id
                for name, fig in (("timeline", plotting.timeline(df, timeouts_s=timeouts, title=title)),
                                  ("step and collective times", plotting.step_and_collective_times(df, title=title))):
                    png = base64.b64encode(figure_png(fig, _PLOT_DPI)).decode("ascii")
                    self._pngs.append((name, png))
                    bundles.append(_bundle({"image/png": png, "text/plain": f"<{name} plot of {title}>"}))
        self.output.outputs = tuple(bundles)

    def _busy(self, busy: bool) -> None:
        self.button.disabled = busy
        self.button.description = "Running…" if busy else "Run"
        self.button.icon = "hourglass-half" if busy else "play"
        if busy:
            self.progress.bar_style = "info"

    @staticmethod
    def _status_html(text: str, level: str) -> str:
        return f"<span style='color:{_LEVEL_COLOUR[level]}'>{text}</span>"

    def _say(self, text: str, level: str) -> None:
        self.status.value = self._status_html(text, level)
