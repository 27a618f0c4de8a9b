"""Every registered scenario through the CLI, as a user runs it: ``nccl-workbook run ID --variant
all --json``. ``broken`` must fail with the diagnosed culprits equal to the declared ones, every
fix must succeed, and the command must end in time. The CLI attaches to the session's shared
cluster (``$NCCL_WORKBOOK_SHARED_CLUSTER``), so this measures the runs, not cluster start-up
(``test_cli_and_reaper.py`` covers a cold start)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from nccl_workbook.scenarios import SCENARIOS


@pytest.mark.parametrize("scenario_id", list(SCENARIOS))
def test_run_all_variants(scenario_id: str) -> None:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "nccl_workbook.cli", "run", scenario_id, "--variant", "all", "--world-size", "4", "--json"],
        capture_output=True, text=True, timeout=240,
    )
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert [r["variant"] for r in results] == SCENARIOS[scenario_id].variant_names
    broken, fixes = results[0], results[1:]
    assert broken["outcome"] != "ok", broken
    assert broken["expected_culprits"], "a broken variant must declare its culprit ranks"
    assert sorted(broken["culprit_ranks"]) == sorted(broken["expected_culprits"]), broken
    for r in fixes:
        assert r["outcome"] == "ok", r
        assert r["culprit_ranks"] == []
    print(f"{scenario_id}: --variant all in {wall:.1f} s; " + ", ".join(f"{r['variant']}={r['wall_s']}s" for r in results))
    assert wall < 60
