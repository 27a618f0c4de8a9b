from __future__ import annotations

import json
import subprocess
from pathlib import Path
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


def test_lab_turns_the_news_off_and_trusts_the_notebooks(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse
    import shutil

    import nbformat
    from nbformat.sign import NotebookNotary

    from nccl_workbook import cli

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NCCL_WORKBOOK_HOME", str(tmp_path / "home"))
    nbs = tmp_path / "notebooks"
    nbs.mkdir()
    shutil.copy(cli._notebooks_dir() / "00_start_here.ipynb", nbs)
    calls: list[list[str]] = []
    monkeypatch.setattr(cli.os, "execv", lambda exe, cmd: calls.append(cmd))
    cli._cmd_lab(argparse.Namespace(notebook_dir=str(nbs), ip="127.0.0.1", port=None, no_browser=True))
    (cmd,) = calls
    settings = [a.split("=", 1)[1] for a in cmd if a.startswith("--LabApp.app_settings_dir=")]
    assert settings, cmd
    overrides = json.loads((Path(settings[0]) / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert NotebookNotary().check_signature(nbformat.read(nbs / "00_start_here.ipynb", as_version=4))


def test_plots_keep_labels_apart_and_show_the_worker_darkest() -> None:
    """The culprit computing is saturated, the waiting ranks pale; with several variants an overview
    on a shared axis comes first and each variant has its own zoomed axis with units."""
    df = _df()
    early = df[df["t_enqueue_rel_ns"] < 1_000_000_000]
    other = early.assign(variant="fixed", t_end_rel_ns=early["t_enqueue_rel_ns"] + 10_000_000,
                         status="ok", t_end_ns=early["t_enqueue_ns"] + 10_000_000)
    import pandas as pd

    fig = plots.timeline(pd.concat([df, other], ignore_index=True), timeouts_s={"broken": 3.0}, title="x")
    overview, broken, fixed = fig.axes
    assert "same axis" in overview.get_xlabel()
    assert broken.get_xlim()[1] > 3 and fixed.get_xlim()[1] < 0.1  # each zoomed to its own run
    assert all("(s)" in ax.get_xlabel() for ax in fig.axes)
    assert plots.WAIT_FILL["timeout"] != plots.STATUS_COLOURS["timeout"]  # waiting is pale
    labels = [t for t in broken.texts if "BARRIER" in t.get_text()]
    assert len({(t.get_position()[1]) for t in labels}) == len(labels)  # at most one label per lane here
