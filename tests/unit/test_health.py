from __future__ import annotations

import pandas as pd
import pytest

from nccl_workbook import health, plots
from nccl_workbook.cli import main


def test_busbw_factors_match_nccl_tests() -> None:
    assert health.BUSBW_FACTOR("all_reduce", 4) == 1.5
    assert health.BUSBW_FACTOR("all_gather", 8) == 7 / 8
    assert health.BUSBW_FACTOR("reduce_scatter", 2) == 0.5
    assert health.BUSBW_FACTOR("broadcast", 16) == 1.0


def test_default_sizes_span_4b_to_64mib() -> None:
    s = health.DEFAULT_SIZES
    assert s[0] == 4 and s[-1] == 64 * 2**20 and all(b == 4 * a for a, b in zip(s, s[1:]))
    assert health.default_sizes(3) == ()


def test_iterations_are_bounded() -> None:
    p = health.SweepParams()
    its = [p.iters(s) for s in health.DEFAULT_SIZES]
    assert its[0] == p.max_iters and all(p.min_iters <= i <= p.max_iters for i in its)
    assert its == sorted(its, reverse=True) and p.iters(2**30) == p.min_iters


def test_table_and_plot() -> None:
    df = pd.DataFrame([
        {"op": op, "size_bytes": b, "bytes": b, "time_us": 10.0 + b / 1e3, "algbw_gbps": b / (10e-6 + b / 1e9) / 1e9,
         "busbw_gbps": 1.0} for op in ("all_reduce", "broadcast") for b in (4, 1024, 2**20)
    ])
    res = health.SweepResult(df, host_copy_gbps=5.0, world_size=4, backend="gloo", wall_s=1.0)
    t = res.table()
    assert list(t.index) == ["4 B", "1 KiB", "1 MiB"] and ("bus bandwidth (MB/s)", "all_reduce") in t.columns
    assert t.loc["4 B", ("bus bandwidth (MB/s)", "all_reduce")] == "1000"  # MB/s: small messages are not 0.000
    assert "µs up to 4 KiB" in res.latency_note()
    fig = plots.bandwidth(df, host_copy_gbps=5.0)
    assert fig.axes[0].get_ylabel() == "bus bandwidth (GB/s)" and fig.axes[0].get_xlabel() == "message size (bytes, powers of 2)"
    assert fig._repr_png_().startswith(b"\x89PNG")


def test_check_cli_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--world-size", "1"]) == 2
    assert main(["check", "--max-size", "2"]) == 2
    assert "at least 4 bytes" in capsys.readouterr().err
