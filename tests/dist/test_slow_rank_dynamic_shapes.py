"""slow-rank-dynamic-shapes on 4 real gloo ranks: the seed's .repeat() fix leaves the timeout in
place (same culprit, same op), and the per-step table shows why (the long rank computes past the
timeout, the others wait it out in the gradient all-reduce)."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import Outcome
from nccl_workbook.runner import run_scenario
from nccl_workbook.scenarios.slow_rank_dynamic_shapes import step_breakdown

ID = "slow-rank-dynamic-shapes"


def test_repeat_does_not_fix_the_timeout(cluster: RankCluster) -> None:
    r = run_scenario(cluster, ID, "broken", expand_mode="repeat")
    assert r.outcome is Outcome.TIMEOUT and r.culprit_ranks == (2,) and r.failed_op == "ALLREDUCE"
    df = step_breakdown([r], expand_mode="repeat").set_index(["rank", "step"])
    assert df.loc[(2, 2), "padded_len"] == 1024 and df.loc[(2, 2), "compute_s"] > 1.5 * r.pg_timeout_s
    for rank in (0, 1, 3):
        assert abs(df.loc[(rank, 2), "wait_s"] - r.pg_timeout_s) < 0.5 and df.loc[(rank, 2), "compute_s"] < 0.5
