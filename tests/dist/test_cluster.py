"""RankCluster against real engines: outcomes, deadlines, dead engines, rank mapping."""

from __future__ import annotations

import time

from nccl_workbook.cluster import RankCluster
from nccl_workbook.results import RankStatus

from .programs import die_on_rank, hang_outside_collective, use_fixes_like_a_user


def test_repr_and_engines(cluster: RankCluster) -> None:
    assert "running" in repr(cluster) and ("owned" in repr(cluster) or "shared" in repr(cluster))
    info = cluster.engines
    assert sorted(info) == [0, 1, 2, 3]
    assert len({i.pid for i in info.values()}) == 4
    assert cluster.backend == "gloo"


def test_fixes_work_in_a_users_program(cluster: RankCluster) -> None:
    # main rank "works" 4 s on a 2 s main-group timeout: the side group absorbs the wait
    run = cluster.run(use_fixes_like_a_user, 4.0, pg_timeout_s=2.0)
    assert [r.status for r in run.reports] == [RankStatus.OK] * 4, [r.error for r in run.reports]
    assert run.reports[0].metrics["main_result"] == "done"
    assert run.reports[1].metrics["main_result"] == "None"
    assert all(r.metrics["squares_ok"] for r in run.reports)


def test_hung_rank_hits_the_client_deadline_and_is_replaced(cluster: RankCluster) -> None:
    before = cluster.engine_ids
    t0 = time.perf_counter()
    run = cluster.run(hang_outside_collective, 2, pg_timeout_s=2.0, deadline_s=6.0)
    assert time.perf_counter() - t0 < 30
    statuses = [r.status for r in run.reports]
    assert statuses[2] is RankStatus.TIMEOUT and "client deadline" in run.reports[2].error
    # the others waited in the barrier for rank 2 until the group timeout
    assert all(s in (RankStatus.TIMEOUT, RankStatus.PEER_CLOSED) for i, s in enumerate(statuses) if i != 2)
    assert any("killed it" in n for n in run.notes)
    # next run: the stuck engine was replaced by a new one with a new id, ranks are remapped
    ok = cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0)
    assert [r.status for r in ok.reports] == [RankStatus.OK] * 4
    after = cluster.engine_ids
    assert len(after) == 4 and after != before and before[2] not in after
    assert any("replacement" in n for n in ok.notes)


def test_engine_death_is_crashed_then_replaced(cluster: RankCluster) -> None:
    run = cluster.run(die_on_rank, 1, pg_timeout_s=3.0, deadline_s=30)
    assert run.reports[1].status is RankStatus.CRASHED
    # what the dead rank had recorded (its first barrier) comes back from the file its tracer wrote
    dead_rows = run.reports[1].rows
    assert [(r.name, r.seq, r.status) for r in dead_rows][:1] == [("BARRIER", 1, "ok")]
    assert any("read back" in n for n in run.notes)
    assert all(r.status is not RankStatus.OK for r in run.reports)
    ok = cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0)
    assert [r.status for r in ok.reports] == [RankStatus.OK] * 4
    assert any("replacement" in n for n in ok.notes)


def test_world_size_subset_and_bad_arguments(cluster: RankCluster) -> None:
    import pytest

    run = cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0, world_size=2)
    assert len(run.reports) == 2 and all(r.status is RankStatus.OK for r in run.reports)
    with pytest.raises(ValueError, match="between 1 and 4"):
        cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=3.0, world_size=5)
    with pytest.raises(ValueError, match="pg_timeout_s"):
        cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=0)


def test_a_failed_rendezvous_of_the_run_itself_is_repeated_once(cluster: RankCluster) -> None:
    import socket

    from nccl_workbook import launchers

    from .programs import take_the_next_port_pick

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # bound, not listening: the other ranks are refused until their timeout
        cluster.ensure_healthy()  # an engine an earlier test killed is replaced first
        cluster.view(cluster.engine_ids[0]).apply_sync(take_the_next_port_pick, held.getsockname()[1])
        run = cluster.run(use_fixes_like_a_user, 0.0, pg_timeout_s=2.0)
    assert [r.status for r in run.reports] == [RankStatus.OK] * 4, [r.error for r in run.reports]
    assert any("rendezvous failed before the program started" in n and "EADDRINUSE" in n for n in run.notes), run.notes
    # a pick is below the kernel's ephemeral range (where no outgoing connection is given a port)
    low = launchers._ephemeral_low()
    assert all(1024 <= launchers.free_port("127.0.0.1") < low for _ in range(20))
