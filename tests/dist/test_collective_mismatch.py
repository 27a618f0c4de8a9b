"""collective-mismatch on 4 real gloo ranks: the desync fixes as a user calls them, the broken run
(an engine aborts, the diagnosis still names rank 3, the engine is replaced before the next run)
and DETAIL as the detector."""

from __future__ import annotations

from typing import Any

import pytest

from nccl_workbook.cluster import RankCluster
from nccl_workbook.diagnose import Verdict, diagnose
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import run_scenario
from nccl_workbook.scenarios.collective_mismatch import dtype_program
from nccl_workbook.trace import trace_frame

ID = "collective-mismatch"


def agree_like_a_user(ctx: Any, odd: int) -> dict[str, Any]:
    """Module-level rank program (pickled by reference): each fix as a user script calls it."""
    import torch
    import torch.distributed as dist

    from nccl_workbook.fixes import DesyncError, any_rank, check_same, detail_group, max_across_ranks, pad_to

    out: dict[str, Any] = {
        "any": any_rank(dist.get_rank() == odd),
        "all": any_rank(False),
        "max": max_across_ranks(10 + dist.get_rank()),
    }
    counts = torch.ones(10 if dist.get_rank() == odd else 9, dtype=torch.int64)
    padded = pad_to(counts, max_across_ranks(counts.numel()))
    dist.all_reduce(padded)
    out["padded_sum"] = int(padded.sum())
    try:
        check_same(tuple(counts.shape), "shape")
        out["odd"] = ""
    except DesyncError as e:
        out["odd"] = ",".join(map(str, e.odd_ranks))
    checked = detail_group()
    try:
        dist.all_reduce(counts, group=checked)
        out["detail"] = "no error"
    except RuntimeError as e:
        out["detail"] = "mismatch reported" if "Detected mismatch between collectives" in str(e) else str(e)[:80]
    return out


def test_fixes_on_four_ranks(cluster: RankCluster) -> None:
    run = cluster.run(agree_like_a_user, 2, pg_timeout_s=5)
    assert [r.status for r in run.reports] == [RankStatus.OK] * 4, [r.error for r in run.reports]
    for rep in run.reports:
        m = rep.metrics
        assert m["any"] is True and m["all"] is False and m["max"] == 13
        assert m["padded_sum"] == 9 * 3 + 10 and m["odd"] == "2" and m["detail"] == "mismatch reported"


def test_broken_crash_is_diagnosed_and_recovered_and_detail_reports_it(cluster: RankCluster) -> None:
    broken = run_scenario(cluster, ID, "broken")
    assert broken.outcome is not Outcome.OK
    assert broken.culprit_ranks == (3,) == broken.expected_culprits and broken.failed_op == "ALLREDUCE"
    # the next run starts with a whole cluster again, whatever died
    detail = run_scenario(cluster, ID, "broken", detail=True)
    assert len(cluster.engine_ids) == 4
    assert detail.outcome is Outcome.ERROR and detail.culprit_ranks == (3,)
    assert all("Detected mismatch between collectives" in (p.error or "") for p in detail.per_rank)
    assert detail.wall_s < broken.pg_timeout_s  # reported long before any timeout
    fixed = run_scenario(cluster, ID, "agree-first", kind="op")
    assert fixed.ok and all(m["histogram_ok"] for m in fixed.metrics.values())


def test_dtype_mismatch_on_gloo(cluster: RankCluster) -> None:
    """One rank all-reduces another dtype than the others (measured on gloo, deterministic):
    bigger elements abort a bystander, smaller ones the odd rank itself, and either way the trace
    names the odd rank and its dtype; elements of the same size corrupt the sum silently, unless
    DETAIL is on."""
    def diag(run):  # noqa: ANN001, ANN202
        trace = trace_frame([row for rep in run.reports for row in rep.rows], offsets_ns=run.clock_offsets_ns)
        return diagnose(trace, {r.rank: r.status for r in run.reports}, world_size=4, pg_timeout_s=3)

    wide = cluster.run(dtype_program, "float64", pg_timeout_s=3)
    d = diag(wide)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (3,), d.message
    assert "rank 3: ALLREDUCE(numel=8, dtype=float64)" in d.message
    assert RankStatus.CRASHED in {r.status for r in wide.reports}

    narrow = cluster.run(dtype_program, "bfloat16", pg_timeout_s=3)
    d = diag(narrow)
    # the odd rank itself died; its row, read back from its spill file, still shows its dtype
    assert narrow.reports[3].status is RankStatus.CRASHED and d.culprit_ranks == (3,)
    assert d.verdict is Verdict.MISMATCH and "rank 3: ALLREDUCE(numel=8, dtype=bfloat16)" in d.message

    same_size = cluster.run(dtype_program, "int32", pg_timeout_s=3)
    assert all(r.status is RankStatus.OK for r in same_size.reports)
    sums = [r.metrics["sum"] for r in same_size.reports]
    # no error anywhere, and every sum is wrong (4 ranks of ones should give 32): rank 3's int32 ones
    # read as float32 are ~1e-45, and the others' float32 ones read as int32 are 1065353216
    assert sums[:3] == pytest.approx([24.0] * 3, rel=1e-6) and abs(sums[3] - 32.0) > 1e6
    # DETAIL compares dtypes in its fingerprint: every rank gets the report instead of a wrong sum
    detail = cluster.run(dtype_program, "int32", pg_timeout_s=3, debug_level="DETAIL")
    assert all(r.status is RankStatus.ERROR and "Detected mismatch" in (r.error or "") for r in detail.reports)
