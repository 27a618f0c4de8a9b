"""slow-metrics-on-rank0, exception-on-one-rank and dataloader-stall on 4 real gloo ranks: the
claims their notebooks rest on, beyond the CLI contract that test_every_scenario_cli.py checks."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import run_scenario
from nccl_workbook.scenarios import dataloader_stall, exception_on_one_rank

from .programs_failures import abort_while_blocked, count_children


def test_fail_fast_names_the_failing_rank_even_when_it_hosts_the_store(cluster: RankCluster) -> None:
    r = run_scenario(cluster, "exception-on-one-rank", "fail-fast", fail_rank=0)
    assert r.outcome is Outcome.OK, [p.error for p in r.per_rank]
    stops = exception_on_one_rank.stop_frame(r)
    assert stops["names_the_cause"].all(), stops
    assert (stops["stopped_after_s"] < 1.0).all(), stops
    assert all(r.metrics[k]["stopped_early"] for k in range(4))
    assert "rank 0 raised ValueError: cannot decode sample" in str(r.metrics[3]["stop_reason"])


def test_gloo_tells_the_peers_when_the_failing_rank_leaves(cluster: RankCluster) -> None:
    # what the NCCL emulation suppresses: under gloo, a rank that leaves frees its peers at once
    r = run_scenario(cluster, "exception-on-one-rank", "broken", exit_seen_by_peers=True)
    assert r.outcome is Outcome.ERROR and r.culprit_ranks == (2,)
    assert {p.status for p in r.per_rank if p.rank != 2} == {RankStatus.PEER_CLOSED}
    assert (exception_on_one_rank.stop_frame(r).drop(index=2)["stopped_after_s"] < 1.0).all()


def test_short_loader_timeout_stops_everyone_on_the_data_error_and_leaves_no_workers(cluster: RankCluster) -> None:
    before = [rep.metrics["children"] for rep in cluster.run(count_children, None, pg_timeout_s=5).reports]
    r = run_scenario(cluster, "dataloader-stall", "short-loader-timeout")
    assert r.outcome is Outcome.OK, [p.error for p in r.per_rank]
    stops = dataloader_stall.stop_frame(r)
    assert stops["names_the_data_loader"].all(), stops
    assert (stops["stopped_after_s"] < 2.5).all(), stops  # loader timeout 1 s, group timeout 3 s
    assert "rank 2 raised RuntimeError: DataLoader timed out after 1.0 seconds" in str(r.metrics[0]["stop_reason"])
    after = cluster.run(count_children, None, pg_timeout_s=5)
    assert [rep.metrics["children"] for rep in after.reports] == before


def test_background_logging_keeps_the_push_off_the_training_thread(cluster: RankCluster) -> None:
    r = run_scenario(cluster, "slow-metrics-on-rank0", "background-logging", slow_flush_s=1.0)
    assert r.outcome is Outcome.OK
    m = r.metrics[0]
    assert m["longest_flush_s"] >= 1.0 and m["log_s_on_training_thread"] < 0.1 and m["dropped"] == 0


def test_no_abort_frees_a_blocked_gloo_collective(cluster: RankCluster) -> None:
    # why FailFast cannot free gloo peers from their own side (nccl_workbook/fixes/failfast.py)
    run = cluster.run(abort_while_blocked, None, pg_timeout_s=2.0)
    m = run.reports[0].metrics
    assert m["called"] == "abort,shutdown,_abort_process_group"
    assert m["raised"] and m["all_reduce_s"] >= 1.8, m
