from __future__ import annotations

from nccl_workbook.diagnose import Verdict, collective_table, diagnose, failed_collective_frame, op_from_traceback
from nccl_workbook.results import RankStatus as S

from .factories import coll, frame, step


def test_late_rank_is_the_culprit() -> None:
    rows = [coll(r, 1, 0.0, 0.01) for r in range(4)]
    rows += [coll(r, 2, 0.1, 3.1, "timeout", op="BARRIER", numel=None) for r in (1, 2, 3)]
    rows += [coll(0, 2, 4.9, 4.91, "peer_closed", op="BARRIER", numel=None)]
    d = diagnose(frame(rows), {0: S.PEER_CLOSED, 1: S.TIMEOUT, 2: S.TIMEOUT, 3: S.TIMEOUT}, world_size=4, pg_timeout_s=3)
    assert d.verdict is Verdict.LATE_RANK
    assert d.culprit_ranks == (0,) and d.late_ranks == (0,) and d.missing_ranks == ()
    assert d.failed_op == "BARRIER" and d.failed_seq == 2
    assert abs(d.arrival_skew_s - 4.8) < 1e-6
    waits = failed_collective_frame(frame(rows), d, 4)
    assert waits.loc[1, "waited_s"] == 3.0 and waits.loc[0, "status"] == "peer_closed"


def test_missing_rank_never_arrived() -> None:
    rows = [coll(r, 1, 0.0, 0.01) for r in range(3)]
    rows += [coll(r, 2, 0.2, 3.2, "timeout") for r in (0, 2)]
    d = diagnose(frame(rows), {0: S.TIMEOUT, 1: S.ERROR, 2: S.TIMEOUT}, world_size=3, pg_timeout_s=3)
    assert d.verdict is Verdict.MISSING_RANK and d.culprit_ranks == (1,) and d.failed_op == "ALLREDUCE"
    assert failed_collective_frame(frame(rows), d, 3).loc[1, "status"] == "never arrived"


def test_crashed_rank_without_rows_is_missing() -> None:
    rows = [coll(r, 1, 0.0, 3.0, "timeout") for r in (0, 1, 3)]
    d = diagnose(frame(rows), {0: S.TIMEOUT, 1: S.TIMEOUT, 2: S.CRASHED, 3: S.TIMEOUT}, world_size=4, pg_timeout_s=3)
    assert d.culprit_ranks == (2,) and d.verdict is Verdict.MISSING_RANK
    assert "crashed" in d.message and "never called it" not in d.message  # its rows died with it
    alive = diagnose(frame(rows), {0: S.TIMEOUT, 1: S.TIMEOUT, 2: S.TIMEOUT, 3: S.TIMEOUT}, world_size=4, pg_timeout_s=3)
    assert alive.culprit_ranks == (2,) and "never called it" in alive.message


def test_mismatch_blames_the_minority() -> None:
    rows = [coll(r, 1, 0.0, 3.0, "timeout", op="ALLREDUCE", numel=1024) for r in (0, 1, 2)]
    rows += [coll(3, 1, 0.0, 3.0, "timeout", op="ALLGATHER", numel=1024)]
    d = diagnose(frame(rows), {r: S.TIMEOUT for r in range(4)}, world_size=4, pg_timeout_s=3)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (3,) and d.failed_op == "ALLREDUCE"
    assert "rank 3: ALLGATHER" in d.message


def test_size_mismatch() -> None:
    rows = [coll(0, 1, 0.0, 1.0, "error", numel=10), coll(1, 1, 0.0, 1.0, "error", numel=10), coll(2, 1, 0.0, 1.0, "error", numel=12)]
    d = diagnose(frame(rows), {r: S.ERROR for r in range(3)}, world_size=3, pg_timeout_s=3)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (2,)


def test_dtype_mismatch_names_the_odd_rank_and_shows_dtypes_only_when_they_differ() -> None:
    rows = [coll(r, 1, 0.0, 3.0, "timeout", numel=8, dtype="float32") for r in (0, 1, 3)]
    rows += [coll(2, 1, 0.0, 3.0, "timeout", numel=8, dtype="bfloat16")]
    d = diagnose(frame(rows), {r: S.TIMEOUT for r in range(4)}, world_size=4, pg_timeout_s=3)
    assert d.verdict is Verdict.MISMATCH and d.culprit_ranks == (2,)
    assert "rank 2: ALLREDUCE(numel=8, dtype=bfloat16)" in d.message and "rank 0: ALLREDUCE(numel=8, dtype=float32)" in d.message
    same = [coll(r, 1, 0.0, 1.0, "error", numel=10 + (r == 2), dtype="float32") for r in range(3)]
    d2 = diagnose(frame(same), {r: S.ERROR for r in range(3)}, world_size=3, pg_timeout_s=3)
    assert d2.culprit_ranks == (2,) and "dtype" not in d2.message


def test_all_ok_and_no_collective_failure() -> None:
    rows = [coll(r, 1, 0.0, 0.01) for r in range(2)]
    assert diagnose(frame(rows), {0: S.OK, 1: S.OK}, world_size=2, pg_timeout_s=3).verdict is Verdict.OK
    rows2 = rows + [step(1, 0, 0.02, 0.03, "error")]
    d = diagnose(frame(rows2), {0: S.OK, 1: S.ERROR}, world_size=2, pg_timeout_s=3)
    assert d.verdict is Verdict.RANK_FAILED and d.culprit_ranks == (1,)


def test_straggler_below_timeout_named_when_far_behind() -> None:
    # everyone arrived before the timeout, but rank 2 was 2.5 s behind on a 3 s timeout
    rows = [coll(0, 1, 0.0, 3.0, "timeout"), coll(1, 1, 0.0, 3.0, "timeout"), coll(2, 1, 2.5, 3.0, "peer_closed")]
    d = diagnose(frame(rows), {0: S.TIMEOUT, 1: S.TIMEOUT, 2: S.PEER_CLOSED}, world_size=3, pg_timeout_s=3)
    assert d.culprit_ranks == (2,)


def test_collective_table() -> None:
    rows = [coll(0, 1, 1.0, 2.0), coll(1, 1, 0.5, 2.0), coll(0, 2, 3.0, 3.1), coll(1, 2, 3.05, 3.1)]
    t = collective_table(frame(rows))
    assert list(t["seq"]) == [1, 2]
    assert t.loc[0, "last_rank"] == 0 and t.loc[0, "skew_ns"] == 500_000_000
    assert t.loc[1, "last_rank"] == 1 and bool(t["completed"].all())


def test_op_from_traceback() -> None:
    tb = 'File "train.py", line 40, in train\n    loss.backward()\n  File "torch/_tensor.py", line 5, in backward\n'
    assert op_from_traceback(tb) == "ALLREDUCE"
    assert op_from_traceback('  File "x.py", line 2, in all_gather_object\n') == "ALLGATHER"
    assert op_from_traceback("nothing") is None and op_from_traceback(None) is None


def test_straggler_scores_charge_the_wait_to_the_last_rank() -> None:
    from nccl_workbook.diagnose import straggler_scores

    rows = []
    for seq in range(1, 11):
        t = float(seq)
        for r in (0, 1, 3):
            rows.append(coll(r, seq, t + 0.001 * r, t + 0.2))
        rows.append(coll(2, seq, t + 0.1, t + 0.2))  # rank 2 is always ~0.1 s late
    rows.append(coll(0, 11, 20.0, None, "timeout"))  # a collective not everyone reached: left out
    scores = straggler_scores(frame(rows))
    assert scores["score"].idxmax() == 2 and scores.loc[2, "score"] > 0.95
    assert scores.loc[2, "last_arrivals"] == 10 and scores.loc[2, "wait_s"] == 0
    assert abs(scores["score"].sum() - 1.0) < 1e-3
    assert abs(scores.loc[2, "caused_wait_s"] - 10 * (0.1 + 0.099 + 0.097)) < 1e-6
    # a window with no collectives charges nobody
    empty = straggler_scores(frame(rows), steps=(100, 200))
    assert (empty["score"] == 0).all()
