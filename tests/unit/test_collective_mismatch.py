"""collective-mismatch: the desync fixes on a 1-rank gloo group, the scenario's data and params,
the diagnosis when a crashed engine's rows are lost, and the cluster's world-size bound after a
crash (no cluster needed)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from nccl_workbook import fixes
from nccl_workbook.cluster import RankCluster
from nccl_workbook.diagnose import Verdict, diagnose
from nccl_workbook.results import RankStatus as S
from nccl_workbook.scenarios import get_scenario
from nccl_workbook.scenarios.collective_mismatch import Params, log_class_counts, make_batch

from .factories import coll, frame


@pytest.fixture
def one_rank_group():  # noqa: ANN201
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_pad_to() -> None:
    assert fixes.pad_to(torch.tensor([3, 1]), 4).tolist() == [3, 1, 0, 0]
    assert fixes.pad_to(torch.tensor([1.0]), 2, value=-1).tolist() == [1.0, -1.0]
    with pytest.raises(ValueError, match="shorter length"):
        fixes.pad_to(torch.tensor([1, 2, 3]), 2)
    with pytest.raises(ValueError, match="1-D"):
        fixes.pad_to(torch.zeros(2, 2), 4)


def test_desync_error_names_the_odd_ranks() -> None:
    e = fixes.DesyncError("shape", {0: (9,), 1: (9,), 2: (10,)}, (2,))
    assert e.odd_ranks == (2,) and "rank(s) 2 differ" in str(e) and "rank 2: (10,)" in str(e)


def test_agreement_helpers_on_one_rank(one_rank_group: None) -> None:
    assert fixes.any_rank(True) and not fixes.any_rank(False)
    assert fixes.all_ranks(True) and not fixes.all_ranks(False)
    assert fixes.max_across_ranks(7) == 7
    fixes.check_same((9,), "shape")  # one rank always agrees with itself


def test_debug_level_is_restored_and_checked(one_rank_group: None) -> None:
    before = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    level_before = dist.get_debug_level()
    with fixes.debug_level("detail"):
        assert os.environ["TORCH_DISTRIBUTED_DEBUG"] == "DETAIL"
        assert dist.get_debug_level() == dist.DebugLevel.DETAIL
    assert os.environ.get("TORCH_DISTRIBUTED_DEBUG") == before
    assert dist.get_debug_level() == level_before
    with pytest.raises(ValueError, match="debug level must be one of"):
        with fixes.debug_level("LOUD"):
            pass


def test_detail_group_works_and_restores_the_level(one_rank_group: None) -> None:
    level_before = dist.get_debug_level()
    g = fixes.detail_group()
    assert dist.get_debug_level() == level_before
    t = torch.ones(3)
    dist.all_reduce(t, group=g)
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_batches_make_only_the_odd_rank_disagree() -> None:
    p = Params()
    shapes = {r: torch.bincount(make_batch(r, p.mismatch_step, p)[1]).numel() for r in range(4)}
    assert shapes == {0: 9, 1: 9, 2: 9, 3: 10}
    assert all(torch.bincount(make_batch(r, 0, p)[1]).numel() == 9 for r in range(4))


def test_log_class_counts_static_and_agree_on_one_rank(one_rank_group: None) -> None:
    labels = make_batch(0, 0, Params())[1]
    for kind in ("shape", "op"):
        for mode in ("static", "agree", "broken"):
            counts = log_class_counts(labels, Params(kind=kind, mode=mode))
            assert int(counts.sum()) == labels.numel()
    assert log_class_counts(labels, Params(mode="static")).numel() == 10
    assert log_class_counts(labels, Params(mode="broken", guard=True)).numel() == 9


def test_params_are_checked() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        Params(kind="dtype")
    with pytest.raises(ValueError, match="mode must be one of"):
        Params(mode="fixed")
    with pytest.raises(ValueError, match="mismatch_step"):
        Params(mismatch_step=4)
    with pytest.raises(ValueError, match="must hold one sample of every class"):
        Params(batch=4)
    with pytest.raises(ValueError, match="odd_rank must be >= 0"):
        Params(odd_rank=-1)
    s = get_scenario("collective-mismatch")
    assert s.params_for("agree-first").mode == "agree" and s.expected_culprits(Params(), 4) == (3,)
    assert s.expected_culprits(Params(), 2) == (1,)  # a smaller run: the last rank is the odd one


def test_diagnosis_when_a_bystander_engine_died() -> None:
    # measured: rank 3 all-reduces 10 counts, the others 9; rank 2 (which receives rank 3's chunk)
    # aborts and its rows are lost; 0, 1 and 3 see their peer close
    rows = [coll(r, s, 0.01 * s, 0.01 * s + 0.005) for r in (0, 1, 3) for s in range(1, 6)]
    rows += [coll(r, 6, 0.1, 0.12, "peer_closed", numel=9) for r in (0, 1)]
    rows += [coll(3, 6, 0.1, 0.12, "peer_closed", numel=10)]
    statuses = {0: S.PEER_CLOSED, 1: S.PEER_CLOSED, 2: S.CRASHED, 3: S.PEER_CLOSED}
    d = diagnose(frame(rows), statuses, world_size=4, pg_timeout_s=3)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (3,) and d.failed_op == "ALLREDUCE"


def test_diagnosis_when_the_culprit_itself_died() -> None:
    # the odd rank is the one that aborts (measured with the odd buffer smaller): it is missing
    rows = [coll(r, 1, 0.0, 0.02, "peer_closed", numel=4096) for r in (0, 1, 2)]
    statuses = {0: S.PEER_CLOSED, 1: S.PEER_CLOSED, 2: S.PEER_CLOSED, 3: S.CRASHED}
    d = diagnose(frame(rows), statuses, world_size=4, pg_timeout_s=3)
    assert d.culprit_ranks == (3,) and d.verdict is Verdict.MISSING_RANK


class _Client:
    def __init__(self, ids: list[int]) -> None:
        self.ids = ids


def test_max_world_size_counts_engines_that_will_be_replaced() -> None:
    c = RankCluster(n_ranks=4)
    assert c.max_world_size == 4
    c._client, c._ipp_cluster = _Client([0, 1, 3]), object()  # one engine died, we can start another
    assert c.max_world_size == 4
    c._ipp_cluster = None  # attached to a cluster we cannot add engines to: only what is alive
    assert c.max_world_size == 3
    c._client = None


def test_dead_engine_output_is_kept_out_of_the_notebook() -> None:
    import logging

    c = RankCluster(n_ranks=4)
    logger = logging.getLogger("nccl_workbook.tests.fake_ipp_cluster")
    logger.addFilter(c._output_filter)
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger.addHandler(Keep())
    try:
        logger.warning("Output for %s:\n%s", "2", "terminate called after throwing an instance of 'gloo::EnforceNotMet'")
        logger.warning("engine set stopped 17: {'engines': {'0': {'exit_code': -6}}, 'exit_code': -6}")
        logger.warning("Controller stopped: %s", "x")
    finally:
        logger.filters.clear()
        logger.handlers.clear()
    assert seen == ["Controller stopped: x"]  # everything else still reaches the log
    assert len(c.engine_exit_output) == 2 and "gloo::EnforceNotMet" in c.engine_exit_output[0]
    assert "exit_code': -6" in c.engine_exit_output[1]


def test_waiting_for_replacement_engines_polls_the_registered_ids() -> None:
    from nccl_workbook.cluster import ClusterError

    class Growing:
        def __init__(self) -> None:
            self.calls = 0

        @property
        def ids(self) -> list[int]:
            self.calls += 1
            return [0, 1, 2] if self.calls < 3 else [0, 1, 2, 5]

    c = RankCluster(n_ranks=4)
    c._client = Growing()
    c._wait_for_registered(5.0)  # returns once the fourth engine registered
    c._client = _Client([0, 1, 2])
    with pytest.raises(ClusterError, match="4 engines not registered within 0.1 s"):
        c._wait_for_registered(0.1)
    c._client = None


def test_mismatch_without_a_majority_names_every_side() -> None:
    # three ranks, the receiving rank aborted: one survivor per size, nothing decides between them
    rows = [coll(0, 1, 0.0, 0.02, "peer_closed", numel=9), coll(2, 1, 0.0, 0.02, "peer_closed", numel=10)]
    d = diagnose(frame(rows), {0: S.PEER_CLOSED, 1: S.CRASHED, 2: S.PEER_CLOSED}, world_size=3, pg_timeout_s=3)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (0, 2) and d.failed_op == "ALLREDUCE"
    assert "no majority" in d.message and "rank(s) 1 left no rows" in d.message
    # two ranks calling different collectives: both named, the op of neither side preferred silently
    rows = [coll(0, 1, 0.0, 3.0, "timeout", op="ALLREDUCE"), coll(1, 1, 0.0, 3.0, "timeout", op="ALLGATHER")]
    d = diagnose(frame(rows), {0: S.TIMEOUT, 1: S.TIMEOUT}, world_size=2, pg_timeout_s=3)
    assert d.culprit_ranks == (0, 1) and "no majority" in d.message


def test_a_dead_ranks_open_rows_end_when_a_peer_saw_it_go() -> None:
    from nccl_workbook.trace import close_open_rows

    from .factories import coll, step

    dead = (step(2, 0, 0.0, 0.5), coll(2, 1, 0.1, 0.2), step(2, 1, 0.5, None), coll(2, 2, 0.6, None, "running"))
    others = [
        coll(0, 2, 0.6, 0.05, "peer_closed"),  # closed before the dead rank's last event: not its death
        coll(0, 2, 0.6, 0.71, "peer_closed"), coll(1, 2, 0.6, 0.70, "peer_closed"), coll(3, 2, 0.6, 0.9, "timeout")]
    closed = close_open_rows(dead, others, fallback_ns=5 * 10**9)
    assert closed[:2] == dead[:2]  # rows that had ended are left alone
    assert [(r.t_end_ns, r.status) for r in closed[2:]] == [(int(0.70 * 1e9), "crashed")] * 2
    # no peer saw it: the time the client learnt of it
    assert close_open_rows(dead, [], fallback_ns=5 * 10**9)[3].t_end_ns == 5 * 10**9
