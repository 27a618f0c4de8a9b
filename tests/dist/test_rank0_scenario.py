"""The first scenario end to end on 4 real gloo ranks: broken times out on rank 0's account,
every fix succeeds, and the diagnosis from the trace agrees with the ground truth."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import combined_trace, run_variants

ID = "rank0-work-before-barrier"


def test_all_variants(cluster: RankCluster) -> None:
    results = {r.variant: r for r in run_variants(cluster, ID, "all")}
    broken = results.pop("broken")
    assert broken.outcome is Outcome.TIMEOUT
    assert broken.culprit_ranks == (0,) == broken.expected_culprits
    assert broken.failed_op in ("BARRIER", "ALLREDUCE")
    assert broken.per_rank[0].status is RankStatus.PEER_CLOSED
    assert {r.status for r in broken.per_rank[1:]} <= {RankStatus.TIMEOUT, RankStatus.PEER_CLOSED}
    assert RankStatus.TIMEOUT in {r.status for r in broken.per_rank[1:]}
    # the waiting ranks gave up when the 3 s timeout ran out, not before, not much later
    assert 2.5 < broken.diagnosis.arrival_skew_s < 10
    for name, r in results.items():
        assert r.outcome is Outcome.OK, (name, [p.error for p in r.per_rank])
        assert r.culprit_ranks == () and r.diagnosis_agrees
        assert all(p.steps == 6 for p in r.per_rank)
    assert results["longer-timeout"].pg_timeout_s > broken.pg_timeout_s
    assert results["side-barrier"].pg_timeout_s == broken.pg_timeout_s
    assert results["shard-work"].wall_s < results["side-barrier"].wall_s
    assert results["shard-work"].metrics[0]["samples_generated"] == 8
    df = combined_trace([broken, *results.values()])
    assert set(df["variant"]) == {"broken", "longer-timeout", "side-barrier", "shard-work"}
    regions = df[(df["kind"] == "region") & (df["variant"] == "shard-work")]
    assert set(regions["rank"]) == {0, 1, 2, 3}  # everyone generated a share
