from __future__ import annotations

import json

import pytest

from nccl_workbook.results import Outcome, RankOutcome, RankStatus, RunResult, classify_error


@pytest.mark.parametrize(
    ("exc", "msg", "expected"),
    [
        ("RuntimeError", "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete", RankStatus.TIMEOUT),
        ("RuntimeError", "[gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 3000ms for send operation to complete", RankStatus.TIMEOUT),
        ("DistBackendError", "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)", RankStatus.TIMEOUT),
        ("RuntimeError", "[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4531", RankStatus.PEER_CLOSED),
        ("RuntimeError", "Application timeout caused pair closure", RankStatus.PEER_CLOSED),
        ("ValueError", "corrupt sample: timed out reading", RankStatus.ERROR),  # not a dist error type
        ("KeyError", "'x'", RankStatus.ERROR),
    ],
)
def test_classify_error(exc: str, msg: str, expected: RankStatus) -> None:
    assert classify_error(exc, msg) is expected


def test_outcome_priority() -> None:
    S = RankStatus
    assert Outcome.from_statuses([S.OK, S.OK]) is Outcome.OK
    assert Outcome.from_statuses([S.PEER_CLOSED, S.TIMEOUT]) is Outcome.TIMEOUT
    assert Outcome.from_statuses([S.ERROR, S.TIMEOUT, S.CRASHED]) is Outcome.CRASHED
    assert Outcome.from_statuses([S.ERROR, S.PEER_CLOSED]) is Outcome.ERROR


def _result(**kw: object) -> RunResult:
    base = dict(scenario="s", variant="broken", backend="gloo", world_size=2, pg_timeout_s=3.0,
                outcome=Outcome.TIMEOUT, expected_culprits=(0,), culprit_ranks=(0,), expected_op="BARRIER",
                failed_op="BARRIER", per_rank=(RankOutcome(0, RankStatus.PEER_CLOSED, "x", 3, 0.01234567),
                                               RankOutcome(1, RankStatus.TIMEOUT, "y", 3, None)), wall_s=5.123456)
    base.update(kw)
    return RunResult(**base)  # type: ignore[arg-type]


def test_run_result_json_contract() -> None:
    d = _result().to_json()
    assert json.loads(json.dumps(d)) == d
    assert {"scenario", "variant", "backend", "world_size", "pg_timeout_s", "outcome", "expected_culprits",
            "culprit_ranks", "failed_op", "per_rank", "wall_s"} <= set(d)
    assert d["outcome"] == "timeout" and d["culprit_ranks"] == [0]
    assert d["per_rank"][0] == {"rank": 0, "status": "peer_closed", "error": "x", "steps": 3, "step_time_median_s": 0.0123}
    assert d["per_rank"][1]["step_time_median_s"] is None


def test_diagnosis_agreement_and_html() -> None:
    assert _result().diagnosis_agrees
    assert not _result(culprit_ranks=(1,)).diagnosis_agrees
    html = _result(culprit_ranks=(1,))._repr_html_()
    assert "DISAGREES" in html and "peer_closed" in html
    frame = _result().ranks_frame()
    assert list(frame.index) == [0, 1] and frame.loc[0, "status"] == "peer_closed"
