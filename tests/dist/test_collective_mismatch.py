"""collective-mismatch on 4 real gloo ranks: the desync fixes as a user calls them, the broken run
(an engine aborts, the diagnosis still names rank 3, the engine is replaced before the next run)
and DETAIL as the detector."""

from __future__ import annotations

from typing import Any

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import run_scenario

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
