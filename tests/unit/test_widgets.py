"""ScenarioPanel without a browser and without engines: a stopped cluster, a cluster that fails, and a
fake cluster that returns a real timeout (so the whole panel path runs: progress, the live hang
message, results table, details, plots), plus the pure helpers."""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

import pytest

pytest.importorskip("ipywidgets")

from nccl_workbook.cluster import ClusterError, RankCluster  # noqa: E402
from nccl_workbook.cluster_run import ClusterRun  # noqa: E402
from nccl_workbook.observer import HangReport  # noqa: E402
from nccl_workbook.render import results_html, stacks_html  # noqa: E402
from nccl_workbook.status import short_error  # noqa: E402
from nccl_workbook.results import Outcome, RankOutcome, RankReport, RankStatus, RunResult  # noqa: E402
from nccl_workbook.widgets import ScenarioPanel, clean_float, figure_png  # noqa: E402
from tests.unit.factories import coll, step  # noqa: E402

SCENARIO = "rank0-work-before-barrier"
GLOO_TIMEOUT = "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"
STACK = """  File "/x/ipykernel/zmqshell.py", line 10, in run_cell
    exec(code, shell.user_global_ns, shell.user_ns)
  File "<string>", line 1, in <module>
  File "nccl_workbook/rank.py", line 209, in run_rank
    metrics = dict(spec.program(ctx, spec.params) or {})
  File "nccl_workbook/scenarios/rank0_work_before_barrier.py", line 105, in program
    dist.barrier()  # the seed's barrier
"""


def _hang(**kw: Any) -> HangReport:
    base = dict(op="BARRIER", pg="0", seq=4, waiting_ranks=(1,), culprit_ranks=(0,), detected_after_s=1.1,
                onset_ns=0, detected_ns=1, where={0: "in region 'generate_samples' for 1.1 s", 1: "in BARRIER for 1.1 s"},
                stacks={0: STACK, 1: STACK})
    return HangReport(**{**base, **kw})


def _report(rank: int, status: RankStatus, rows: tuple, error: str | None = None) -> RankReport:
    return RankReport(rank=rank, status=status, error=error, exc_type="RuntimeError" if error else None,
                      traceback=None, steps=1, step_times_ns=(10_000_000,), rows=rows, metrics={}, pid=100 + rank,
                      host="h", t_begin_ns=0, t_end_ns=4_000_000_000)


class FakeCluster:
    """What run_scenario needs of a RankCluster; ``run`` reports progress, names a hang live and
    returns rank 1 timed out in the barrier that rank 0 reached late (or raises ``fail``)."""

    n_ranks = 2
    max_world_size = 2

    def __init__(self, *, running: bool = True, fail: Exception | None = None) -> None:
        self.running = running
        self.fail = fail
        self.calls: list[dict[str, Any]] = []

    def run(self, program: Any, params: Any, **kw: Any) -> ClusterRun:
        self.calls.append(kw)
        if self.fail is not None:
            raise self.fail
        kw["progress"](0.5, 0, 2)
        kw["on_hang"](_hang())
        kw["progress"](1.5, 1, 2)
        rows0 = (step(0, 0, 0.0, 0.1), coll(0, 1, 0.1, 0.11), coll(0, 2, 4.0, 4.01, "peer_closed", op="BARRIER"))
        rows1 = (step(1, 0, 0.0, 0.1), coll(1, 1, 0.1, 0.11), coll(1, 2, 0.2, 3.2, "timeout", op="BARRIER"))
        return ClusterRun(
            reports=(_report(0, RankStatus.PEER_CLOSED, rows0, "RuntimeError: Connection closed by peer"),
                     _report(1, RankStatus.TIMEOUT, rows1, GLOO_TIMEOUT)),
            wall_s=4.0, backend="gloo", world_size=2, pg_timeout_s=kw["pg_timeout_s"],
            clock_offsets_ns={0: 0, 1: 0}, notes=(), hang=_hang(),
        )


def _html(panel: ScenarioPanel) -> str:
    return "".join(o["data"].get("text/html", "") for o in panel.output.outputs)


def _images(panel: ScenarioPanel) -> list[bytes]:
    return [base64.b64decode(o["data"]["image/png"]) for o in panel.output.outputs if "image/png" in o["data"]]


# -- messages instead of exceptions ----------------------------------------------------------------
def test_stopped_cluster_gives_a_message_and_no_results():
    panel = ScenarioPanel(RankCluster(n_ranks=4), SCENARIO, variants=["broken"])
    assert panel.run() == [] and panel.results == []
    assert "not running" in panel.status.value and "RankCluster(n_ranks=4).start()" in panel.status.value
    assert panel.output.outputs == () and not panel.button.disabled


def test_no_variant_ticked_gives_a_message():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, variants=["broken"])
    panel.variant_boxes["broken"].value = False
    assert panel.run() == []
    assert "Tick at least one variant" in panel.status.value


def test_a_cluster_failure_is_a_message_not_a_traceback():
    panel = ScenarioPanel(FakeCluster(fail=ClusterError("engines [2] did not answer")), SCENARIO, variants=["broken"])
    assert panel.run() == []
    assert "could not complete" in panel.status.value and "engines [2] did not answer" in panel.status.value
    assert "cluster.stop(); cluster.start()" in panel.status.value
    assert panel.progress.bar_style == "danger"
    assert not panel.button.disabled and panel.button.description == "Run"


def test_invalid_settings_are_a_message():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, variants=["broken"])
    panel.timeout.value = 0.5
    panel.cluster.max_world_size = 1  # world size 2 > what the "cluster" holds: run_scenario raises ValueError
    assert panel.run() == []
    assert "Cannot run" in panel.status.value and "world size" in panel.status.value


# -- a run that times out (a result) ---------------------------------------------------------------
def test_a_timeout_is_shown_as_a_result_with_progress_live_hang_and_plots():
    cluster = FakeCluster()
    panel = ScenarioPanel(cluster, SCENARIO, variants=["broken"], knobs={"seconds_per_sample": ("work per sample (s)", 0.05, 2.0, 0.05)})
    seen: list[str] = []
    panel.status.observe(lambda ch: seen.append(ch["new"]), names="value")
    buttons: list[str] = []
    panel.button.observe(lambda ch: buttons.append(ch["new"]), names="description")
    root = logging.getLogger("nccl_workbook")
    propagate = root.propagate

    results = panel.run()

    assert [r.variant for r in results] == ["broken"] and panel.results == results
    assert results[0].outcome is Outcome.TIMEOUT
    assert buttons[:1] == ["Running…"] and panel.button.description == "Run" and not panel.button.disabled
    assert any("running <code>broken</code> (1 of 1): 0.5 s, 0 of 2 ranks finished" in s for s in seen)
    assert any("suspected hang, named live" in s and "for rank(s) 0" in s for s in seen)
    assert "1 run(s) in" in panel.status.value and "not ok: broken" in panel.status.value
    assert panel.progress.value == 1 and panel.progress.bar_style == "warning"
    html = _html(panel)
    assert "timeout" in html and "BARRIER" in html and "agrees" in html
    assert "[unbound_buffer.cc:78] Timed out waiting 3000ms" in html and "/__w/" not in html.split("title=")[0]
    assert "Python stack" in html
    images = _images(panel)
    assert len(images) == 2 and all(png.startswith(b"\x89PNG") for png in images)
    assert root.propagate == propagate and not any(type(h).__name__ == "_LogToPanel" for h in root.handlers)
    assert cluster.calls[0]["pg_timeout_s"] == 3.0 and cluster.calls[0]["world_size"] == 2


def test_plots_can_be_switched_off():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, variants=["broken"], plots=False)
    panel.run()
    assert _images(panel) == [] and "timeout" in _html(panel)
    panel.show_plots.value = True
    panel.run()
    assert len(_images(panel)) == 2


def test_settings_are_clean_of_browser_float_noise():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, knobs={"seconds_per_sample": ("work per sample (s)", 0.05, 2.0, 0.05),
                                                          "n_samples": ("samples on rank 0", 1, 32, 1)})
    panel.timeout.value = 2.9999999999999996  # what JupyterLab's slider sent back for 3.0
    panel.knobs["seconds_per_sample"].value = 0.10000000000000002
    assert panel.timeout.value == 3.0 and panel.knobs["seconds_per_sample"].value == 0.1
    assert panel.settings() == {"world_size": 2, "timeout_s": 3.0, "seconds_per_sample": 0.1, "n_samples": 8}
    assert isinstance(panel.settings()["n_samples"], int)


def test_public_api_is_unchanged():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, knobs={"n_samples": ("samples on rank 0", 1, 32, 1)},
                          variants=["broken", "shard-work"], plots=False)
    assert {v for v, b in panel.variant_boxes.items() if b.value} == {"broken", "shard-work"}
    assert callable(panel.run) and panel.results == [] and "n_samples" in panel.settings()
    assert panel.variant_boxes["side-barrier"].tooltip.startswith("waiting ranks wait on a gloo side group")


# -- pure helpers ----------------------------------------------------------------------------------
def test_short_error_and_clean_float():
    assert short_error(GLOO_TIMEOUT) == "RuntimeError: [unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"
    assert short_error(None) == "" and short_error("x" * 500, 20) == "x" * 19 + "…"
    assert short_error("bad peer [127.0.0.1]:1234") == "bad peer [127.0.0.1]:1234"
    assert clean_float(2.9999999999999996) == 3.0 and clean_float(0.05) == 0.05


def test_results_html_summary_and_details():
    ok = RunResult(scenario=SCENARIO, variant="shard-work", backend="gloo", world_size=2, pg_timeout_s=3.0,
                   outcome=Outcome.OK, expected_culprits=(), culprit_ranks=(), expected_op=None, failed_op=None,
                   per_rank=(RankOutcome(0, RankStatus.OK, steps=3), RankOutcome(1, RankStatus.OK, steps=3)), wall_s=1.25)
    bad = RunResult(scenario=SCENARIO, variant="broken", backend="gloo", world_size=2, pg_timeout_s=3.0,
                    outcome=Outcome.TIMEOUT, expected_culprits=(0,), culprit_ranks=(1,), expected_op="BARRIER",
                    failed_op="BARRIER", per_rank=(RankOutcome(0, RankStatus.PEER_CLOSED, "closed"),
                                                   RankOutcome(1, RankStatus.TIMEOUT, GLOO_TIMEOUT)),
                    wall_s=5.0, hang=_hang())
    html = results_html([bad, ok])
    assert html.index("<code>broken</code>") < html.index("<code>shard-work</code>")
    assert "DISAGREES" in html  # diagnosed 1, ground truth 0
    assert "<details open" in html and html.count("<details") == 3  # broken (open), its stacks, shard-work (folded)
    # the live line, the same words as the CLI's, with "unresolved" explained
    assert "named rank(s) [0] in BARRIER 1.1 s after the others started waiting" in html
    assert "unresolved: still waiting when the run ended" in html and "timeout needed 2.7x longer" in html
    assert results_html([]) == ""


def test_stacks_leave_out_the_workbooks_own_frames():
    html = stacks_html({0: STACK, 1: STACK}, {0: "in region 'generate_samples'"})
    assert "dist.barrier()" in html and "run_rank" not in html and "exec(code" not in html
    assert html.index("rank 0") < html.index("rank 1") and "generate_samples" in html


def test_figure_png_needs_no_pyplot():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 1))
    fig.add_subplot().plot([0, 1])
    small, large = figure_png(fig, 40), figure_png(fig, 120)
    assert small.startswith(b"\x89PNG") and len(small) < len(large)


def test_button_click_runs_like_run():
    panel = ScenarioPanel(FakeCluster(), SCENARIO, variants=["broken"], plots=False)
    t0 = time.perf_counter()
    panel.button.click()
    assert [r.variant for r in panel.results] == ["broken"] and time.perf_counter() - t0 < 30


def test_stored_output_is_a_snapshot_not_the_widget_repr(monkeypatch: pytest.MonkeyPatch):
    """Displayed, the panel gives the widget view plus a static HTML snapshot of its last run, and
    each run refreshes that same display: a notebook opened without a kernel shows the results."""
    import IPython.display as ipd

    shown: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(ipd, "display", lambda data, raw, display_id: shown.append(("display", data)))
    monkeypatch.setattr(ipd, "update_display", lambda data, raw, display_id: shown.append(("update", data)))
    panel = ScenarioPanel(FakeCluster(), SCENARIO, variants=["broken"])
    panel._ipython_display_()
    (kind, first), = shown
    assert kind == "display" and "application/vnd.jupyter.widget-view+json" in first
    assert "children=" not in first["text/plain"] and "not run yet" in first["text/plain"]
    assert "run the notebook" in first["text/html"]
    panel.run()
    kind, after = shown[-1]
    assert kind == "update" and "children=" not in after["text/plain"]
    assert "Snapshot of the last run" in after["text/html"] and "BARRIER" in after["text/html"]
    assert after["text/html"].count("<img") == 2
    assert "broken" in after["text/plain"] and "timeout" in after["text/plain"]
