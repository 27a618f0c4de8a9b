"""The three faces of triage: the CLI subcommands, the text/JSON/HTML report, the plot and the
notebook widget."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from nccl_workbook.triage import EVENT_COLUMNS, events_frame, example_log_text, parse_log, plot_rank_events, triage_log
from nccl_workbook.triage.commands import add_parsers

EXAMPLE = Path(__file__).resolve().parents[2] / "nccl_workbook" / "data" / "example_logs" / "rank0_sample_generation_4gpu.log"


def cli(argv: list[str], stdin: bytes = b"", monkeypatch=None) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="nccl-workbook")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    old_out, old_in = sys.stdout, sys.stdin
    sys.stdout = out
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        code = args.func(args)
    finally:
        sys.stdout, sys.stdin = old_out, old_in
    return code, out.getvalue()


def test_triage_cli_text_report_from_file():
    code, out = cli(["triage", str(EXAMPLE)])
    assert code == 0
    assert "What happened: ALLREDUCE (SeqNum 6764, NumelIn=1, timeout 600 s) failed on rank(s) 1-3." in out
    assert "In the log:    This log covers all 4 ranks (world size from the launcher's per-rank summary)." in out
    assert "Most likely: rank 0 [medium]." in out
    assert "\n     notebook: notebooks/01_rank0_work_before_barrier.ipynb\n" in out


def test_triage_cli_json_contract_from_stdin():
    code, out = cli(["triage", "-", "--json"], stdin=EXAMPLE.read_bytes())
    assert code == 0
    doc = json.loads(out)
    assert set(doc) >= {"events", "findings", "summary"}
    events = doc["events"]
    assert [e["line_no"] for e in events] == sorted(e["line_no"] for e in events)
    first = events[0]
    for field in ("backend", "kind", "rank", "seq_num", "op_type", "numel_in", "numel_out", "timeout_ms",
                  "ran_for_ms", "pg_id", "pg_name", "last_enqueued", "last_completed", "line", "line_no"):
        assert field in first
    assert (first["kind"], first["rank"], first["op_type"], first["seq_num"]) == ("collective_timeout", 1, "ALLREDUCE", 6764)
    top = doc["findings"][0]
    assert (top["scenario"], top["confidence"], top["culprit_ranks"]) == ("rank0-work-before-barrier", "medium", [0])
    assert {"reason", "fix", "notebook"} <= set(top)
    summary = doc["summary"]
    assert (summary["ranks_reported"], summary["ranks_missing"], summary["failed_op"]) == ([1, 2, 3], [0], "ALLREDUCE")
    assert summary["earliest_failure"]["line_no"] == first["line_no"]


def test_triage_cli_default_is_stdin_and_missing_file_is_exit_2(capsys):
    code, out = cli(["triage"], stdin=b"")
    assert code == 0 and "No known failure message" in out
    code, _ = cli(["triage", "/nonexistent/job.log"])
    assert code == 2
    assert "cannot read '/nonexistent/job.log'" in capsys.readouterr().err


def test_doctor_cli_json_and_exit_codes(monkeypatch):
    for name in list(__import__("os").environ):
        if name.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "TORCH_DISTRIBUTED", "CUDA_LAUNCH")):
            monkeypatch.delenv(name)
    code, out = cli(["doctor", "--json"])
    assert code == 0 and json.loads(out) == []
    monkeypatch.setenv("NCCL_TIMEOUT", "1800")
    code, out = cli(["doctor", "--json", "--pg-timeout-s", "600", "--dataloader-timeout-s", "900"])
    checks = [f["check"] for f in json.loads(out)]
    assert code == 1 and checks[:2] == ["nccl-timeout-unread", "dataloader-timeout-not-below-pg"]
    code, out = cli(["doctor"])
    assert "[error] NCCL_TIMEOUT=1800 is set, and nothing reads it." in out


def test_cli_module_registers_both_subcommands():
    cli_module = pytest.importorskip("nccl_workbook.cli")
    parser = cli_module.build_parser()
    args = parser.parse_args(["triage", "x.log", "--json"])
    assert args.func.__name__ == "run_triage" and args.json and args.file == "x.log"
    assert parser.parse_args(["doctor"]).func.__name__ == "run_doctor"


def test_report_text_html_and_frames():
    report = triage_log(example_log_text())
    text = report.render()
    assert text == str(report)
    assert "Per rank:" in text and "behind" in text
    assert report._repr_html_().startswith("<pre")
    frame = report.events_frame()
    assert list(frame.columns) == list(EVENT_COLUMNS)
    assert str(frame["rank"].dtype) == "Int64" and str(frame["seq_num"].dtype) == "Int64"
    assert not (frame.select_dtypes("Int64") == -1).any().any()
    ranks = report.ranks_frame()
    assert list(ranks["rank"]) == [0, 1, 2, 3] and list(ranks["status"]) == ["behind", "timeout", "timeout", "timeout"]
    assert pd.isna(ranks.loc[0, "first_line"])


def test_events_frame_of_nothing_keeps_columns_and_dtypes():
    frame = events_frame([])
    assert list(frame.columns) == list(EVENT_COLUMNS) and len(frame) == 0
    assert str(frame["last_completed"].dtype) == "Int64"


def test_plot_labels_ranks_and_marks_silent_and_culprit():
    report = triage_log(example_log_text())
    fig = report.plot()
    ax = fig.axes[0]
    assert ax.get_xlabel() == "line in the log" and ax.get_ylabel() == "rank"
    assert ax.get_title() == "Which ranks reported what"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["0 (missing)", "1", "2", "3"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"collective_timeout", "pg_status"}


def test_plot_with_unranked_events_and_empty_frame():
    fig = plot_rank_events(events_frame(parse_log(b"RuntimeError: DataLoader timed out after 5 seconds")))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["?"]
    empty = plot_rank_events(events_frame([]))
    assert "no events to plot" in [t.get_text() for t in empty.axes[0].texts]


def test_widget_runs_the_pasted_text_and_uploads():
    pytest.importorskip("ipywidgets")
    from nccl_workbook.triage.widget import triage_panel

    panel = triage_panel(example_log_text())
    report = panel.run()
    assert report.top.culprit_ranks == (0,) and panel.report is report
    assert panel.widget.children == (panel.text, panel.widget.children[1], panel.output)
    panel._on_upload({"new": ({"name": "job.log", "content": memoryview(b"[rank2]: ValueError: boom")},)})
    assert panel.report is not None and panel.report.top.scenario == "exception-on-one-rank"
