"""fd-exhaustion, uneven-eval-allgather and unused-parameters on 4 real gloo ranks: the claims
their notebooks rest on, beyond the CLI contract that test_every_scenario_cli.py checks."""

from __future__ import annotations

from nccl_workbook.cluster import RankCluster
from nccl_workbook.diagnose import Verdict
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import run_scenario, run_variants
from nccl_workbook.scenarios import fd_exhaustion

from .programs_fds import engine_state


def _state(cluster: RankCluster) -> list[dict[str, object]]:
    return [dict(rep.metrics) for rep in cluster.run(engine_state, None, pg_timeout_s=5).reports]


def test_fd_exhaustion_fails_on_the_limited_rank_and_leaves_the_engines_as_it_found_them(cluster: RankCluster) -> None:
    before = _state(cluster)
    broken = run_scenario(cluster, "fd-exhaustion", "broken")
    assert broken.outcome is Outcome.TIMEOUT and broken.culprit_ranks == (1,)
    assert broken.diagnosis.verdict is Verdict.MISSING_RANK and broken.failed_op == "ALLREDUCE"
    assert "Too many open files" in (broken.per_rank[1].error or ""), broken.per_rank[1].error
    assert RankStatus.TIMEOUT in {p.status for p in broken.per_rank if p.rank != 1}
    assert _state(cluster) == before  # workers joined, limit and sharing strategy restored
    headroom = fd_exhaustion.Params().fd_headroom
    fs, raised = run_variants(cluster, "fd-exhaustion", ["file-system-sharing", "raise-limit"])
    for r in (fs, raised):
        assert r.outcome is Outcome.OK, [p.error for p in r.per_rank]
        m = r.metrics[1]
        assert m["workers"] == 8 and m["workers_left"] == 0 and m["fds_peak"] < m["fd_limit"]
    assert fs.metrics[1]["fds_peak"] - fs.metrics[1]["fds_start"] < headroom        # fits the node's low limit
    assert raised.metrics[1]["fds_peak"] - raised.metrics[1]["fds_start"] > headroom  # would not have
    assert _state(cluster) == before


def test_unused_parameters_fixes_and_static_graph(cluster: RankCluster) -> None:
    find, use_all = run_variants(cluster, "unused-parameters", ["find-unused", "use-all-parameters"])
    assert find.ok and use_all.ok
    assert {m["allreduces_per_step"] for m in find.metrics.values()} == {2.0}     # + the used-parameter map
    assert {m["allreduces_per_step"] for m in use_all.metrics.values()} == {1.0}
    assert find.metrics[0]["param_checksum"] == use_all.metrics[0]["param_checksum"]  # same training
    assert use_all.metrics[2]["skipped_aux_steps"] == 1
    static = run_scenario(cluster, "unused-parameters", "broken", ddp="static_graph")
    assert static.outcome is Outcome.TIMEOUT and static.culprit_ranks == (2,)
    assert "training graph has changed" in (static.per_rank[2].error or "")
    fixed_set = run_scenario(cluster, "unused-parameters", "broken", ddp="static_graph", skip_every_step=True)
    assert fixed_set.ok, [p.error for p in fixed_set.per_rank]


def test_uneven_eval_fixes_are_exact_and_the_seed_settings_do_not_help(cluster: RankCluster) -> None:
    for r in run_variants(cluster, "uneven-eval-allgather", ["even-sampler", "gather-counts", "join"]):
        assert r.ok, (r.variant, [p.error for p in r.per_rank])
        assert all(m["exact"] and m["samples_counted"] == 50 for m in r.metrics.values()), r.metrics
    seed = run_scenario(cluster, "uneven-eval-allgather", "broken", batch_size=2, num_workers=2)
    assert seed.outcome is Outcome.TIMEOUT and seed.culprit_ranks == (2, 3) and seed.failed_op == "ALLGATHER"
    assert {seed.per_rank[r].status for r in (2, 3)} == {RankStatus.PEER_CLOSED}
