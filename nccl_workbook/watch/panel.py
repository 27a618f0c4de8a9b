"""ScriptPanel: choose a script, its arguments and a world size, press Run, read the result (notebook 92).

The panel is a thin face over :func:`nccl_workbook.watch.script.run_script` and
:mod:`nccl_workbook.render`: the same result as the CLI and the scenario panels, shown the same way
(summary table, per-rank details, every rank's stack when a stall was named, the live stall named
while the run still went on). ``panel.run()`` does what the button does, so a notebook (and nbval)
can run it without a click; it never raises for what the script does.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

import ipywidgets as w

from nccl_workbook.render import results_html, summary_line
from nccl_workbook.watch.script import example_script, run_script
from nccl_workbook.widgets import SnapshotDisplay

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.cluster import RankCluster
    from nccl_workbook.observer import HangReport
    from nccl_workbook.results import RunResult

__all__ = ["ScriptPanel"]


class ScriptPanel(SnapshotDisplay, w.VBox):
    """Script path, arguments, world size, group timeout, Run; results below."""

    def __init__(self, cluster: RankCluster, path: str | None = None, args: str = "", *, world_size: int = 4,
                 pg_timeout_s: float = 3.0) -> None:
        self.cluster = cluster
        self.results: list[RunResult] = []
        style, layout = {"description_width": "150px"}, w.Layout(width="640px")
        self.path = w.Text(value=path or example_script(), description="script", style=style, layout=layout)
        self.args = w.Text(value=args, description="arguments", style=style, layout=layout)
        self.world_size = w.IntSlider(value=min(world_size, max(2, cluster.n_ranks)), min=2,
                                      max=max(2, cluster.n_ranks), description="world size (ranks)", style=style)
        self.timeout = w.FloatSlider(value=pg_timeout_s, min=0.5, max=60, step=0.5, style=style,
                                     description="group timeout (s)")
        self.button = w.Button(description="Run", button_style="primary", icon="play")
        self.button.on_click(lambda _: self.run())
        self.status = w.HTML("ready: press Run")
        self.output = w.HTML()
        super().__init__([self.path, self.args, self.world_size, self.timeout, w.HBox([self.button, self.status]),
                          self.output])

    def snapshot_html(self) -> str:
        """What a stored notebook shows without a kernel: the script, its arguments, the last result."""
        head = (f"<div><b>your script</b> <code>{html.escape(self.path.value)}</code> "
                f"<code>{html.escape(self.args.value)}</code></div>")
        if not self.results:
            return head + "<p style='color:#555'><i>Script panel: run the notebook to get its controls.</i></p>"
        return (head + "<p style='color:#555'><i>Snapshot of the last run; run the notebook for the live panel."
                       "</i></p>" + results_html(self.results[-1:]))

    def text_plain(self) -> str:
        return "<ScriptPanel: " + ("; ".join(summary_line(r) for r in self.results[-1:]) or "not run yet") + ">"

    def run(self) -> RunResult | None:
        """Run the script with the controls' values; show the result. None when it could not start."""
        live: list[str] = []

        def on_hang(h: HangReport) -> None:
            live.append(h.message)
            self.status.value = f"<span style='color:#e65100'>stall named live: {html.escape(h.message)}</span>"

        self.button.disabled, self.button.description = True, "Running…"
        self.status.value = "running…"
        t0 = time.perf_counter()
        try:
            r = run_script(self.cluster, self.path.value, self.args.value, world_size=self.world_size.value,
                           pg_timeout_s=self.timeout.value, on_hang=on_hang)
        except (FileNotFoundError, ValueError) as e:
            self.status.value = f"<span style='color:#c62828'>cannot run: {html.escape(str(e))}</span>"
            return None
        except Exception as e:  # noqa: BLE001 - the cluster failed: say so, no traceback
            self.status.value = (f"<span style='color:#c62828'>the run could not complete: {html.escape(type(e).__name__)}: "
                                 f"{html.escape(str(e))[:300]}</span>")
            return None
        finally:
            self.button.disabled, self.button.description = False, "Run"
        self.results.append(r)
        self.status.value = f"done in {time.perf_counter() - t0:.1f} s: {html.escape(r.outcome.value)}"
        self.output.value = results_html([r])
        self._refresh_snapshot()
        return r
