"""Notebook panel: paste or upload a log, see the report, the per-rank table and the plot.

The widget only wires :func:`triage_log`, :meth:`TriageReport.ranks_frame` and
:func:`plot_rank_events` together; it holds no logic of its own.

Usage (in a notebook cell)::

    from nccl_workbook.triage.widget import triage_panel
    triage_panel()                          # empty: paste a log, or upload a file
    triage_panel(example_log_text())        # pre-filled with the bundled example
"""

from __future__ import annotations

import io
from typing import Any

from nccl_workbook.triage.report import TriageReport, triage_log

__all__ = ["TriagePanel", "triage_panel"]


class TriagePanel:
    """The ipywidgets panel; ``.widget`` is the VBox to display, ``.report`` the last result."""

    def __init__(self, text: str = "") -> None:
        import ipywidgets as widgets

        self.report: TriageReport | None = None
        self.text = widgets.Textarea(
            value=text,
            placeholder="Paste the log of the failed job here (all ranks, as much as you have)…",
            layout=widgets.Layout(width="100%", height="180px"),
        )
        self.upload = widgets.FileUpload(accept="", multiple=False, description="Upload log")
        self.button = widgets.Button(description="Triage", button_style="primary", icon="search")
        self.output = widgets.Output()
        self.button.on_click(lambda _: self.run())
        self.upload.observe(self._on_upload, names="value")
        self.widget = widgets.VBox([self.text, widgets.HBox([self.upload, self.button]), self.output])

    def _on_upload(self, change: dict[str, Any]) -> None:
        value = change.get("new") or ()
        files = list(value.values()) if isinstance(value, dict) else list(value)
        if files:
            content = files[0].get("content", b"") if isinstance(files[0], dict) else getattr(files[0], "content", b"")
            self.run(bytes(content))

    def run(self, data: bytes | str | None = None) -> TriageReport:
        """Triage ``data`` (default: the text box) and show the result in the output area."""
        from IPython.display import HTML, Image, display

        self.report = triage_log(self.text.value if data is None else data)
        self.output.clear_output()
        with self.output:
            display(HTML(self.report._repr_html_()))
            display(self.report.ranks_frame())
            # a PNG, so the plot shows whatever matplotlib backend the kernel has (or none)
            buffer = io.BytesIO()
            self.report.plot().savefig(buffer, format="png", dpi=90)
            display(Image(data=buffer.getvalue(), format="png"))
        return self.report

    def _ipython_display_(self) -> None:
        """The live widget, plus a static HTML picture of the last report and one line of text, so a
        stored notebook shows the report wherever there is no kernel, never the widget's repr."""
        from IPython.display import display

        data = dict(self.widget._repr_mimebundle_() or {})
        if self.report is not None:
            data["text/html"] = ("<p style='color:#555'><i>Snapshot of the last triage; run the notebook for the "
                                 "live panel.</i></p>" + self.report._repr_html_())
            data["text/plain"] = f"<TriagePanel: {self.report!r}>"
        else:
            data["text/html"] = "<p style='color:#555'><i>Triage panel: run the notebook to paste a log.</i></p>"
            data["text/plain"] = "<TriagePanel: nothing triaged yet>"
        display(data, raw=True)


def triage_panel(text: str = "", *, run: bool = False) -> TriagePanel:
    """A ready panel, optionally pre-filled (and triaged at once with ``run=True``)."""
    panel = TriagePanel(text)
    if run and text:
        panel.run()
    return panel
