"""ipywidgets panels that wire controls to :mod:`nccl_workbook.runner` and :mod:`nccl_workbook.plots`.

:class:`ScenarioPanel` shows controls (world size, group timeout, one or more scenario parameters,
the variants to run), a Run button, a progress bar, and an output area where each run's result
table and the side-by-side plots appear. ``panel.run()`` does exactly what the button does, with
the controls' current values, so a notebook (and nbval) can run the defaults without a click.
Expected outcomes (a timeout is a result) are shown as results; only misuse shows an error
message, and never a stack trace.

Usage::

    panel = ScenarioPanel(cluster, "rank0-work-before-barrier",
                          knobs={"seconds_per_sample": ("work per sample (s)", 0.1, 2.0, 0.05)})
    panel            # display it
    panel.run()      # same as pressing Run
    panel.results    # list[RunResult] of the last run
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping

import ipywidgets as w
from IPython.display import HTML, display

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import RunResult
from nccl_workbook.runner import combined_trace, run_scenario
from nccl_workbook.scenarios import get_scenario

__all__ = ["ScenarioPanel"]

#: knob name -> (label, min, max, step)
Knobs = Mapping[str, tuple[str, float, float, float]]


class ScenarioPanel(w.VBox):
    """Controls + Run + progress + results for one scenario; see the module docstring."""

    def __init__(self, cluster: RankCluster, scenario_id: str, *, knobs: Knobs | None = None,
                 variants: list[str] | None = None, plots: bool = True) -> None:
        self.cluster = cluster
        self.scenario = get_scenario(scenario_id)
        self.results: list[RunResult] = []
        self._plots = plots
        defaults = self.scenario.params_type()
        style = {"description_width": "170px"}
        layout = w.Layout(width="460px")
        self.world_size = w.IntSlider(value=min(4, cluster.n_ranks), min=2, max=max(2, cluster.n_ranks),
                                      description="world size (ranks)", style=style, layout=layout)
        self.timeout = w.FloatSlider(value=self.scenario.default_timeout_s, min=0.5, max=30, step=0.5,
                                     description="group timeout (s)", style=style, layout=layout)
        self.knobs: dict[str, w.FloatSlider | w.IntSlider] = {}
        for name, (label, lo, hi, step) in (knobs or {}).items():
            value = getattr(defaults, name)
            cls = w.IntSlider if isinstance(value, int) and not isinstance(value, bool) else w.FloatSlider
            self.knobs[name] = cls(value=value, min=lo, max=hi, step=step, description=label, style=style, layout=layout)
        chosen = variants or self.scenario.variant_names
        self.variant_boxes = {
            v: w.Checkbox(value=v in chosen, description=v, indent=False, layout=w.Layout(width="auto"))
            for v in self.scenario.variant_names
        }
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.button.on_click(lambda _: self.run())
        self.progress = w.FloatProgress(value=0, min=0, max=1, description="idle", style=style,
                                        layout=w.Layout(width="460px"))
        self.status = w.HTML()
        self.output = w.Output()
        super().__init__([
            w.HTML(f"<b>{html.escape(self.scenario.title)}</b> <code>{self.scenario.id}</code>"),
            self.world_size, self.timeout, *self.knobs.values(),
            w.HBox([w.Label("variants:"), *self.variant_boxes.values()]),
            w.HBox([self.button, self.progress]), self.status, self.output,
        ])

    def settings(self) -> dict[str, object]:
        """The controls' current values as keyword arguments for ``run_scenario``/``run_variants``,
        so later cells run the fixes with whatever the user chose here."""
        return {"world_size": self.world_size.value, "timeout_s": self.timeout.value,
                **{k: s.value for k, s in self.knobs.items()}}

    # -- the one action --------------------------------------------------------------------------
    def run(self) -> list[RunResult]:
        """Run the ticked variants with the controls' values; show results and plots."""
        variants = [v for v, box in self.variant_boxes.items() if box.value]
        self.output.clear_output()
        if not variants:
            self._say("Tick at least one variant.", "warn")
            return []
        if not self.cluster.running:
            self._say("The cluster is not running: run the cell that starts it (<code>cluster.start()</code>), then Run again.", "warn")
            return []
        settings = self.settings()
        self.button.disabled = True
        self.results = []
        t0 = time.perf_counter()
        try:
            for i, v in enumerate(variants):
                self.progress.description = f"{v} ({i + 1}/{len(variants)})"

                def progress(elapsed: float, done: int, total: int, i: int = i) -> None:
                    self.progress.value = (i + done / max(total, 1)) / len(variants)
                    self._say(f"running <code>{v}</code>: {elapsed:.1f} s, {done}/{total} ranks finished", "info")

                try:
                    r = run_scenario(self.cluster, self.scenario.id, v, progress=progress, **settings)
                except (ValueError, KeyError) as e:
                    self._say(html.escape(str(e.args[0] if e.args else e)), "warn")
                    return self.results
                self.results.append(r)
                with self.output:
                    display(HTML(r._repr_html_()))
            self.progress.value = 1
            self.progress.description = "done"
            self._say(f"{len(self.results)} run(s) in {time.perf_counter() - t0:.1f} s", "ok")
            if self._plots:
                self._show_plots()
        except Exception as e:  # noqa: BLE001 - the cluster failed: say so, no traceback
            self._say(f"The cluster failed: {html.escape(str(e))}. Restart it with <code>cluster.stop(); cluster.start()</code>.", "warn")
        finally:
            self.button.disabled = False
        return self.results

    def _show_plots(self) -> None:
        from nccl_workbook import plots

        df = combined_trace(self.results)
        if len(df) == 0:
            return
        timeouts = {r.variant: r.pg_timeout_s for r in self.results}
        with self.output:
            display(plots.timeline(df, timeouts_s=timeouts, title=self.scenario.id))
            display(plots.step_and_collective_times(df, title=self.scenario.id))

    def _say(self, text: str, level: str) -> None:
        colour = {"ok": "#2e7d32", "info": "#455a64", "warn": "#c62828"}[level]
        self.status.value = f"<span style='color:{colour}'>{text}</span>"
