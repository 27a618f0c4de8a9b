from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nccl_workbook import plots
from nccl_workbook.cli import main
from nccl_workbook.runner import validate_run_args

from .factories import coll, frame, step


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "nope"], "Unknown scenario 'nope'; known: rank0-work-before-barrier"),
        (["run", "rank0-work-before-barrier", "--variant", "x"], "known: broken, longer-timeout, side-barrier, shard-work"),
        (["run", "rank0-work-before-barrier", "--world-size", "1"], "at least 2"),
        (["run", "rank0-work-before-barrier", "--world-size", "999"], "more than this cluster/machine can hold"),
        (["run", "rank0-work-before-barrier", "--timeout", "0"], "timeout must be > 0"),
        (["run", "rank0-work-before-barrier", "--timeout", "-2"], "timeout must be > 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_scenarios_listing() -> None:
    out = subprocess.run([sys.executable, "-m", "nccl_workbook.cli", "scenarios", "--json"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    ids = [s["id"] for s in json.loads(out)]
    assert "rank0-work-before-barrier" in ids


def test_validate_run_args() -> None:
    validate_run_args(4, 3.0, 8)
    with pytest.raises(ValueError):
        validate_run_args(4, float("nan"), 8)


def _df():  # noqa: ANN202
    rows = [step(r, 0, 0.0, 0.02) for r in range(3)]
    rows += [coll(r, 1, 0.02, 3.0, "timeout", op="BARRIER", numel=None) for r in (1, 2)]
    rows += [coll(0, 1, 4.0, 4.01, "peer_closed", op="BARRIER", numel=None)]
    df = frame(rows)
    t0 = df["t_enqueue_ns"].min()
    return df.assign(variant="broken", t_enqueue_rel_ns=df["t_enqueue_ns"] - t0, t_end_rel_ns=df["t_end_ns"] - t0)


def test_timeline_is_labelled() -> None:
    fig = plots.timeline(_df(), timeouts_s={"broken": 3.0}, title="x")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time since the run's first event (s)"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1", "rank 2"]
    assert any("timeout (3 s)" in t.get_text() for t in ax.texts)


def test_times_plot_has_units() -> None:
    fig = plots.step_and_collective_times(_df())
    assert "(ms)" in fig.axes[0].get_ylabel() and "(ms" in fig.axes[1].get_ylabel()
    with pytest.raises(ValueError, match="empty trace"):
        plots.timeline(_df().iloc[0:0])
