"""torch's flight recorder on 4 real gloo ranks: the dumps of the broken rank0-work-before-barrier
run, written in torch's format, read back, fixed up for torch's analyzer, and diagnosed to the same
culprit as the run's own trace."""

from __future__ import annotations

from pathlib import Path

from nccl_workbook.cluster import RankCluster
from nccl_workbook.diagnose import Verdict
from nccl_workbook.flight import (
    FR_FILE_PREFIX,
    AnalyzerStatus,
    analyze_dumps,
    as_of_first_timeout,
    diagnose_dumps,
    dumps_from_result,
    fix_for_torch,
    load_dumps,
    run_torch_analyzer,
    statuses_from_dumps,
    trace_from_dumps,
    write_dumps,
)
from nccl_workbook.results import Outcome, RankStatus
from nccl_workbook.runner import run_scenario

ID = "rank0-work-before-barrier"


def test_broken_run_dumps_through_torch_analyzer_and_diagnosis(cluster: RankCluster, tmp_path: Path) -> None:
    result = run_scenario(cluster, ID, "broken")
    assert result.outcome is Outcome.TIMEOUT and set(result.fr_dumps) == {0, 1, 2, 3}
    paths = write_dumps(result, tmp_path)
    assert [p.name for p in paths] == [f"{FR_FILE_PREFIX}{r}" for r in range(4)]
    dumps = load_dumps(tmp_path)
    assert dumps.backend == "gloo" and dumps.world_size == 4
    # only this run's entries were written: one default group per rank
    assert all(len({e.pg_id for e in dumps[r].entries}) == 1 for r in dumps.ranks)

    # torch's analyzer on the files as gloo wrote them, then fixed up
    raw = run_torch_analyzer(tmp_path)
    assert raw.status is AnalyzerStatus.CRASHED and raw.error.startswith("KeyError")
    fixed = run_torch_analyzer(fix_for_torch(dumps))
    assert fixed.status is AnalyzerStatus.NO_ISSUE  # rank 0 did call the barrier, late: torch ignores times

    # the workbook's diagnosis from the dumps alone agrees with the run's (trace + errors)
    d = diagnose_dumps(dumps)
    assert (d.verdict, d.culprit_ranks, d.failed_op) == (result.diagnosis.verdict, result.culprit_ranks, result.failed_op)
    assert d.verdict is Verdict.LATE_RANK and d.culprit_ranks == (0,) == result.expected_culprits
    assert d.failed_op == "BARRIER" and d.arrival_skew_s > result.pg_timeout_s
    assert abs(d.arrival_skew_s - result.diagnosis.arrival_skew_s) < 0.5  # same lateness, two clocks' worth
    df = trace_from_dumps(dumps)
    assert set(df.loc[df["status"] == "running", "name"]) == {"BARRIER"}

    # cut as NCCL's dump-on-timeout would have been taken: rank 0 never reached the barrier
    cut = as_of_first_timeout(dumps)
    assert statuses_from_dumps(cut) == {0: RankStatus.OK, 1: RankStatus.TIMEOUT, 2: RankStatus.TIMEOUT, 3: RankStatus.TIMEOUT}
    v = run_torch_analyzer(fix_for_torch(cut))
    assert v.status is AnalyzerStatus.MISSING_RANKS and v.missing_ranks == (0,) and v.op == "BARRIER"
    c = diagnose_dumps(cut)
    assert c.verdict is Verdict.MISSING_RANK and c.culprit_ranks == (0,)


def test_successful_run_dumps_diagnose_ok(cluster: RankCluster) -> None:
    result = run_scenario(cluster, ID, "shard-work", flight_recorder=True)
    assert result.ok and set(result.fr_dumps) == {0, 1, 2, 3}
    rep = analyze_dumps(dumps_from_result(result))
    assert rep.diagnosis.verdict is Verdict.OK
    assert rep.analyzer.status is AnalyzerStatus.NO_ISSUE and rep.analyzer.collectives_matched > 5
    assert rep.analyzer_as_is is not None and rep.analyzer_as_is.status is AnalyzerStatus.CRASHED
