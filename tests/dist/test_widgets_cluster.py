"""ScenarioPanel on the real shared 4-rank cluster: what the notebook's Run button does, without a
browser (the browser test in tests/e2e does it in JupyterLab)."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("ipywidgets")

from nccl_workbook.results import Outcome  # noqa: E402
from nccl_workbook.widgets import ScenarioPanel  # noqa: E402


def test_panel_run_fills_results_and_output(cluster):  # noqa: ANN001
    panel = ScenarioPanel(cluster, "rank0-work-before-barrier", variants=["broken", "shard-work"],
                          knobs={"seconds_per_sample": ("work per sample (s)", 0.05, 2.0, 0.05)})
    statuses: list[str] = []
    panel.status.observe(lambda ch: statuses.append(ch["new"]), names="value")

    results = panel.run()

    by = {r.variant: r for r in results}
    assert list(by) == ["broken", "shard-work"] and panel.results == results
    assert by["broken"].outcome is not Outcome.OK and by["broken"].culprit_ranks == (0,)
    assert by["shard-work"].outcome is Outcome.OK
    # progress while it ran, the late rank named live before the 3 s timeout, then the summary
    assert any("running <code>broken</code> (1 of 2)" in s for s in statuses)
    assert any("suspected hang, named live" in s and "rank(s) 0" in s for s in statuses), statuses[-5:]
    assert by["broken"].live_hang is not None and by["broken"].live_hang.detected_after_s < by["broken"].pg_timeout_s
    assert "2 run(s) in" in panel.status.value and not panel.button.disabled
    html = "".join(o["data"].get("text/html", "") for o in panel.output.outputs)
    assert "<code>broken</code>" in html and "<code>shard-work</code>" in html and "BARRIER" in html
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in panel.output.outputs if "image/png" in o["data"]]
    assert len(pngs) == 2 and all(p.startswith(b"\x89PNG") for p in pngs)
