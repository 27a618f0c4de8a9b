"""init-rendezvous-timeout on 4 real gloo ranks: the late rank makes every rank fail inside
``init_process_group`` with torch 2.13's rendezvous errors, the regions name it, every fix
succeeds (with the timeouts the ranks read back), and re-setting a group's timeout after init is
measured live."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.runner import run_scenario
from nccl_workbook.scenarios.init_rendezvous_timeout import init_table, timeout_reset_table
from nccl_workbook.status import RankStatus

ID = "init-rendezvous-timeout"


def test_broken_fails_in_init_and_the_regions_name_the_late_rank(cluster: RankCluster) -> None:
    r = run_scenario(cluster, ID, "broken")
    assert r.outcome.value != "ok" and r.expected_culprits == (2,)
    errors = {o.rank: o.error or "" for o in r.per_rank}
    assert "waiting for clients. 3/4 clients joined" in errors[0]
    assert all("wait timeout after 3000ms, keys: /default_pg/" in errors[k] for k in (1, 3))
    assert "The client socket has timed out" in errors[2]
    assert {o.rank: o.status for o in r.per_rank}[2] is RankStatus.ERROR  # DistNetworkError, not a timeout type
    table = init_table(r)
    assert table.index[table["never_arrived"]].tolist() == [2]
    assert table.loc[2, "prepare_s"] >= 5.9 and table.loc[2, "init_began_s"] > 5
    assert (table.loc[[0, 1, 3], "init_ended_s"] < 5).all()
    # diagnose() agrees, from the errors (rank 2 raised a non-timeout error), not from collectives
    assert r.culprit_ranks == (2,) and not r.trace["kind"].eq("collective").any()
    assert r.wall_s < 20


def test_every_fix_succeeds_with_its_timeouts(cluster: RankCluster) -> None:
    for variant in ("prepare-after-init", "long-init-then-short", "store-barrier"):
        r = run_scenario(cluster, ID, variant)
        assert r.outcome.value == "ok", (variant, [o.error for o in r.per_rank])
        m = r.metrics
        assert all(v["timeout_training_s"] == 3.0 for v in m.values()), (variant, m)
        if variant == "long-init-then-short":
            assert all(v["timeout_at_init_s"] == 20.0 for v in m.values())
        if variant == "store-barrier":
            assert m[2]["store_barrier_waited_s"] < 1 and all(m[k]["store_barrier_waited_s"] > 5 for k in (0, 1, 3))
        assert not init_table(r)["never_arrived"].any()
        assert r.wall_s < 15, (variant, r.wall_s)


def test_resetting_the_timeout_after_init_takes_effect(cluster: RankCluster) -> None:
    df = timeout_reset_table(cluster)
    took = df["short timeout took effect"]
    assert not took.iloc[0] and not took.iloc[1]  # nothing; default_pg_timeout after the group exists
    assert took.iloc[2:].all()  # new_group(timeout=), _set_pg_timeout on a group and on the default group
    assert (df["others waited (s)"].iloc[2:] < 1.8).all() and (df["others waited (s)"].iloc[:2] > 2.3).all()
    # the cluster still runs scenarios afterwards (the probe killed its default group on purpose)
    assert run_scenario(cluster, ID, "prepare-after-init").outcome.value == "ok"
