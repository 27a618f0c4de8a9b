"""Flight-recorder dumps without a cluster: the format (read/write/select/fix/cut), torch's own
analyzer as a value, the trace frame and the diagnosis, on synthetic gloo- and NCCL-shaped dumps
from one factory (tests/data/fr/factory.py), plus the ``nccl-workbook fr`` subcommand."""

from __future__ import annotations

import gc
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nccl_workbook import plots
from nccl_workbook.cli import build_parser, main
from nccl_workbook.diagnose import Verdict
from nccl_workbook.flight import (
    FR_FILE_PREFIX,
    AnalyzerStatus,
    EntryState,
    FlightDump,
    FlightDumpError,
    FlightDumps,
    analyze_dumps,
    as_of_first_timeout,
    diagnose_dumps,
    dumps_from_result,
    first_timeout_ns,
    fix_for_torch,
    load_dumps,
    nccl_op_name,
    parse_dump,
    run_torch_analyzer,
    select_run,
    snapshot_at,
    statuses_from_dumps,
    trace_from_dumps,
    write_dumps,
)
from nccl_workbook.results import Outcome, RankStatus, RunResult
from nccl_workbook.trace import COLUMNS, TraceRow, trace_frame
from tests.data.fr import factory as fac

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "fr" / "nccl_rank0_late"
S = fac.S


def dumps_of(job: dict[int, dict], world_size: int | None = None) -> FlightDumps:
    return FlightDumps({r: FlightDump.from_dict(d, r) for r, d in job.items()}, world_size or max(job) + 1, "test")


def gloo_late(late_s: float | None = 4.8) -> FlightDumps:
    return dumps_of(fac.rank0_late_job("gloo", late_s=late_s, timeout_ms=3000))


# -- the format ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "op"), [
    ("nccl:all_reduce", "ALLREDUCE"), ("nccl:all_reduce_barrier", "BARRIER"), ("gloo:barrier", "BARRIER"),
    ("gloo:all_gather", "ALLGATHER"), ("nccl:_all_gather_base", "_ALLGATHER_BASE"), ("nccl:send 0->1", "SEND"),
    ("nccl:recv 1<-0", "RECV"), ("nccl:_reduce_scatter_base", "_REDUCE_SCATTER_BASE"), ("nccl:all_to_all_single", "ALLTOALL_BASE"),
    ("nccl:coalesced", "COALESCED"), ("nccl:something_new", "SOMETHING_NEW"),
])
def test_op_names_in_nccl_spelling(name: str, op: str) -> None:
    assert nccl_op_name(name) == op


def test_parse_nccl_entry_fields() -> None:
    d = parse_dump(pickle.dumps(fac.rank0_late_job()[1]), 1)
    assert d.version == "2.10" and d.comm_lib_version == "2.27.5"
    assert d.pg_config[0].ranks == (0, 1, 2, 3) and d.pg_config[0].desc == "default_pg"
    first, last = d.entries[0], d.entries[-1]
    assert first.state is EntryState.COMPLETED and first.time_discovered_completed_ns is not None
    assert last.profiling_name == "nccl:all_reduce_barrier" and last.op == "BARRIER"
    assert last.state is EntryState.SCHEDULED and last.time_discovered_completed_ns is None
    assert last.numel == 1 and last.nbytes == 4 and last.timeout_ms == 600_000
    assert d.entries[1].numel == 33088 and d.entries[1].nbytes == 4 * 33088
    assert str(last.frames[-1]) == "train at train.py:118"
    assert {p.pg_id: p.last_enqueued for p in d.pg_status} == {0: 5}


def test_gloo_barrier_has_no_size() -> None:
    d = parse_dump(pickle.dumps(fac.rank0_late_job("gloo")[1]), 1)
    assert d.entries[-1].numel is None and d.entries[-1].nbytes is None
    assert all(e.state is EntryState.SCHEDULED for e in d.entries)
    assert d.backends == ("gloo",)


def test_json_dump_loads_like_the_pickle() -> None:
    raw = fac.rank0_late_job()[2]
    as_json = json.loads(json.dumps(raw))
    for e in as_json["entries"]:  # what _dump_fr_trace_json writes for "not seen"
        e["time_discovered_started_ns"] = e["time_discovered_started_ns"] or 0
        e["time_discovered_completed_ns"] = e["time_discovered_completed_ns"] or 0
    a = parse_dump(pickle.dumps(raw), 2)
    b = parse_dump(json.dumps(as_json).encode(), 2)
    assert a.entries == b.entries
    assert b.entries[0].pg_name == "0" and isinstance(b.raw["entries"][0]["process_group"], tuple)


def test_refuses_pickles_with_objects_and_non_dumps() -> None:
    import datetime

    with pytest.raises(FlightDumpError, match="not a flight-recorder dump"):
        parse_dump(pickle.dumps({"version": "2.10", "x": datetime.date(2020, 1, 1)}), 0)
    with pytest.raises(FlightDumpError, match="no 'version' key"):
        parse_dump(pickle.dumps({"entries": []}), 3)
    with pytest.raises(FlightDumpError, match="lacks the field 'profiling_name'"):
        bad = fac.healthy_job()[0]
        del bad["entries"][0]["profiling_name"]
        parse_dump(pickle.dumps(bad), 0)
    with pytest.raises(FlightDumpError, match="JSON"):
        parse_dump(b"{not json", 0)


def test_write_then_load_round_trip_and_torch_reads_the_files(tmp_path: Path) -> None:
    from torch.distributed.flight_recorder.components.loader import read_dump

    dumps = dumps_of(fac.rank0_late_job())
    paths = write_dumps(dumps, tmp_path / "fr")
    assert [p.name for p in paths] == [f"{FR_FILE_PREFIX}{r}" for r in range(4)]
    back = load_dumps(tmp_path / "fr")
    assert back.ranks == (0, 1, 2, 3) and back.world_size == 4 and back.backend == "nccl"
    assert all(back[r].entries == dumps[r].entries for r in range(4))
    t = read_dump(FR_FILE_PREFIX, str(paths[1]))  # torch's own loader
    assert t["rank"] == 1 and t["version"] == "2.10" and t["entries"][-1]["profiling_name"] == "nccl:all_reduce_barrier"


def test_load_dumps_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(FlightDumpError, match="is not a folder"):
        load_dumps(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FlightDumpError, match="no dump files"):
        load_dumps(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    write_dumps(dumps_of(fac.healthy_job()), mixed, prefix="trace_")
    (mixed / "other_0").write_bytes(b"x")
    with pytest.raises(FlightDumpError, match=r"several name prefixes \['other_', 'trace_'\]"):
        load_dumps(mixed)
    assert load_dumps(mixed, prefix="trace_").ranks == (0, 1, 2, 3)
    (mixed / "trace_9").write_bytes(b"garbage")
    with pytest.raises(FlightDumpError, match=r"rank 9 \(trace_9\): not a flight-recorder dump"):
        load_dumps(mixed, prefix="trace_")
    with pytest.raises(ValueError, match="not end in a digit"):
        write_dumps(dumps_of(fac.healthy_job()), tmp_path / "x", prefix="rank1")


def test_world_size_from_pg_config_or_highest_rank(tmp_path: Path) -> None:
    nccl = fac.rank0_late_job()
    write_dumps(dumps_of({r: nccl[r] for r in (1, 2)}, 4), tmp_path / "n")
    n = load_dumps(tmp_path / "n")
    assert n.world_size == 4 and n.missing_dumps == (0, 3)  # NCCL's pg_config says 4 ranks
    gloo = fac.rank0_late_job("gloo")
    write_dumps(dumps_of({r: gloo[r] for r in (0, 2)}, 4), tmp_path / "g")
    assert load_dumps(tmp_path / "g").world_size == 3  # gloo records no membership
    assert load_dumps(tmp_path / "g", world_size=4).missing_dumps == (1, 3)


def test_select_run_keeps_the_newest_default_group() -> None:
    old = fac.healthy_job("gloo")  # an earlier run on the same engines: pg_id 0
    new = fac.rank0_late_job("gloo", late_s=4.8, timeout_ms=3000, pg_id=1)
    side = fac.entry(0, 1, "barrier", backend="gloo", t_s=2.0, pg=("1", "undefined"), pg_id=2)
    job = {}
    for r in range(4):
        entries = old[r]["entries"] + new[r]["entries"] + [dict(side)]
        for i, e in enumerate(entries):
            e["record_id"] = i
        job[r] = fac.dump(entries, backend="gloo")
    whole = dumps_of(job)
    sel = select_run(whole)
    assert {e.pg_id for e in sel[0].entries} == {1, 2}
    assert len(sel[0].entries) == len(new[0]["entries"]) + 1
    assert select_run(sel) == sel  # idempotent
    since = select_run(whole, since_ns=fac.T0 + int(1.5 * S))
    assert [e.pg_id for e in since[1].entries] == [2]
    fixed = fix_for_torch(whole)
    assert [e.record_id for e in fixed[0].entries] == list(range(len(sel[0].entries)))
    assert any("renumbered record_id" in n for n in fixed.notes)
    cfg = {c.name: c for c in fixed[0].pg_config}
    assert set(cfg) == {"0", "1"} and cfg["0"].ranks == (0, 1, 2, 3) and cfg["1"].desc == "undefined"


def test_fix_up_rebuilds_gloo_pg_config_and_leaves_nccl_alone() -> None:
    gloo = gloo_late()
    fixed = fix_for_torch(gloo)
    assert gloo[0].raw["pg_config"] == {"": {"name": "", "desc": "", "ranks": "[]"}}
    assert fixed[0].raw["pg_config"] == {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    assert fixed.notes and "placeholder keyed ''" in fixed.notes[-1]
    assert fixed[0].entries == gloo[0].entries
    nccl = dumps_of(fac.rank0_late_job())
    assert fix_for_torch(nccl) is nccl


def test_snapshot_undoes_later_completions_and_rewinds_pg_status() -> None:
    dumps = dumps_of(fac.rank0_late_job())
    cut = snapshot_at(dumps, fac.T0 + int(0.105 * S))  # inside the first all_reduce
    e = cut[3].entries
    assert [x.profiling_name for x in e] == ["nccl:broadcast", "nccl:all_reduce"]
    assert e[0].state is EntryState.COMPLETED and e[1].state is EntryState.SCHEDULED
    assert e[1].time_discovered_completed_ns is None
    assert {p.pg_id: (p.last_enqueued, p.last_completed) for p in cut[3].pg_status} == {0: (2, 2)}
    assert cut.notes and "cut at" in cut.notes[0]


def test_first_timeout_and_the_nccl_style_cut_of_gloo_dumps() -> None:
    dumps = gloo_late(4.8)
    assert first_timeout_ns(dumps) == fac.T0 + int(1.001 * S) + 3 * S  # rank 1's barrier + 3 s
    cut = as_of_first_timeout(dumps)
    assert [e.op for e in cut[0].entries][-1] == "ALLREDUCE"  # rank 0's late barrier is gone
    assert cut[1].entries[-1].op == "BARRIER"
    assert first_timeout_ns(dumps_of(fac.healthy_job())) is None
    healthy = dumps_of(fac.healthy_job())
    assert as_of_first_timeout(healthy) is healthy


# -- torch's analyzer ---------------------------------------------------------------------------


def test_torch_analyzer_crashes_on_raw_gloo_dumps(capsys: pytest.CaptureFixture[str]) -> None:
    v = run_torch_analyzer(gloo_late())
    assert v.status is AnalyzerStatus.CRASHED and v.error == "KeyError: ('0', 0)"
    assert "crashed" in v.summary
    assert capsys.readouterr().err == ""  # what it logs is captured, never printed


def test_torch_analyzer_after_fix_up_matches_a_late_rank_it_cannot_see() -> None:
    v = run_torch_analyzer(fix_for_torch(gloo_late(4.8)))
    assert v.status is AnalyzerStatus.NO_ISSUE and v.collectives_matched == 5  # it ignores times


def test_torch_analyzer_names_the_missing_rank_on_fixed_gloo_and_nccl() -> None:
    g = run_torch_analyzer(fix_for_torch(dumps_of(fac.rank0_late_job("gloo", late_rank=1, timeout_ms=3000))))
    assert g.status is AnalyzerStatus.MISSING_RANKS and g.missing_ranks == (1,) and g.op == "BARRIER"
    assert "missing ranks: {1}" in g.text
    n = run_torch_analyzer(dumps_of(fac.rank0_late_job()))
    assert (n.status, n.missing_ranks, n.culprit_ranks) == (AnalyzerStatus.MISSING_RANKS, (0,), (0,))
    assert (n.collective, n.op, n.pg, n.collective_seq_id, n.state) == ("nccl:all_reduce_barrier", "BARRIER", "0", 5, "scheduled")
    assert n.to_json()["missing_ranks"] == [0]


def test_torch_analyzer_mismatch_is_a_value() -> None:
    v = run_torch_analyzer(dumps_of(fac.mismatch_job()))
    assert v.status is AnalyzerStatus.MISMATCH and v.culprit_ranks == (2,)
    assert "COLLECTIVE_TYPE_MISMATCH" in v.mismatch and "'all_gather'" in v.mismatch


def test_torch_analyzer_reads_a_folder_like_torchfrtrace_and_keeps_gc_on(tmp_path: Path) -> None:
    v = run_torch_analyzer(FIXTURE)
    assert v.status is AnalyzerStatus.MISSING_RANKS and v.missing_ranks == (0,)
    assert gc.isenabled()  # torch's read_dir disables it; the wrapper turns it back on
    write_dumps(dumps_of({r: d for r, d in fac.rank0_late_job().items() if r != 3}, 4), tmp_path / "three")
    missing = run_torch_analyzer(tmp_path / "three")
    assert missing.status is AnalyzerStatus.CRASHED and "Missing dump files from ranks {3}" in missing.error
    partial = run_torch_analyzer(tmp_path / "three", allow_incomplete_ranks=True)
    assert partial.status is AnalyzerStatus.UNDECIDED and partial.missing_ranks == (3,)
    assert partial.collectives_matched == 0 and "could not decide" in partial.summary  # no rank-3 half for any


def test_fixed_gloo_files_work_with_the_real_torchfrtrace_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    dumps = dumps_of(fac.rank0_late_job("gloo", late_rank=1, timeout_ms=3000))
    write_dumps(dumps, tmp_path / "raw")
    write_dumps(fix_for_torch(dumps), tmp_path / "fixed")
    cmd = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace"]
    raw = subprocess.run([*cmd, str(tmp_path / "raw")], capture_output=True, text=True, timeout=300)
    assert raw.returncode != 0 and "KeyError: ('0'," in raw.stderr
    ok = subprocess.run([*cmd, str(tmp_path / "fixed")], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "missing ranks: {1}" in ok.stdout + ok.stderr


def test_torch_analyzer_time_limit_and_exit_are_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import time

    from torch.distributed.flight_recorder.components import builder

    monkeypatch.setattr(builder, "build_db", lambda *a, **k: time.sleep(1.0))
    v = run_torch_analyzer(dumps_of(fac.healthy_job()), timeout_s=0.1)
    assert v.status is AnalyzerStatus.TIMED_OUT and "0.1 s" in v.summary
    monkeypatch.setattr(builder, "build_db", lambda *a, **k: sys.exit(3))
    v = run_torch_analyzer(dumps_of(fac.healthy_job()))
    assert v.status is AnalyzerStatus.CRASHED and v.error == "SystemExit(3)"


# -- trace frame, statuses, diagnosis ------------------------------------------------------------


def test_nccl_frame_states_and_times() -> None:
    df = trace_from_dumps(dumps_of(fac.rank0_late_job()))
    assert list(df.columns) == list(COLUMNS) and {str(t) for t in df.dtypes} <= {"Int64", "string"}
    done = df[df["name"] == "ALLREDUCE"]
    assert (done["status"] == "ok").all() and done["t_end_ns"].notna().all() and done["t_start_ns"].isna().all()
    barrier = df[df["name"] == "BARRIER"]
    assert set(barrier["rank"]) == {1, 2, 3} and (barrier["status"] == "running").all() and barrier["t_end_ns"].isna().all()
    assert (barrier["seq"] == 5).all() and (barrier["numel"] == 1).all() and (df["kind"] == "collective").all()
    assert set(done["dtype"]) == {"float32"}  # the recorder's "Float", in torch's spelling
    assert statuses_from_dumps(dumps_of(fac.rank0_late_job())) == {0: RankStatus.OK, 1: RankStatus.TIMEOUT,
                                                                     2: RankStatus.TIMEOUT, 3: RankStatus.TIMEOUT}


def test_gloo_frame_infers_completion() -> None:
    df = trace_from_dumps(gloo_late(4.8))
    ar = df[df["name"] == "ALLREDUCE"]
    assert (ar["status"] == "ok").all()
    last_arrival = ar.groupby("seq")["t_enqueue_ns"].max()
    assert (ar["t_end_ns"].to_numpy() == ar["seq"].map(last_arrival).to_numpy()).all()  # ends at the last arrival
    assert (df.loc[df["name"] == "BARRIER", "status"] == "running").all()  # 4.8 s spread > 3 s timeout
    on_time = trace_from_dumps(gloo_late(0.5))
    assert (on_time["status"] == "ok").all()  # everyone reached it within the timeout


def test_gloo_last_collective_with_a_different_dtype_did_not_complete() -> None:
    job = {r: fac.dump([fac.entry(0, 1, backend="gloo", t_s=0.1, dtype="BFloat16" if r == 1 else "Float")],
                       backend="gloo", world_size=2) for r in (0, 1)}
    df = trace_from_dumps(dumps_of(job, 2))
    assert df.set_index("rank")["dtype"].to_dict() == {0: "float32", 1: "bfloat16"}
    assert (df["status"] == "running").all()  # same op and size, but not the same dtype
    same = {r: fac.dump([fac.entry(0, 1, backend="gloo", t_s=0.1)], backend="gloo", world_size=2) for r in (0, 1)}
    assert (trace_from_dumps(dumps_of(same, 2))["status"] == "ok").all()


def test_coalesced_group_is_one_row_and_p2p_has_its_own_group() -> None:
    df = trace_from_dumps(dumps_of(fac.coalesced_job(), 2))
    assert df[df["rank"] == 0]["seq"].tolist() == [1, 2]
    first = df[(df["rank"] == 0) & (df["seq"] == 1)].iloc[0]
    assert first["name"] == "ALLREDUCE" and first["numel"] == 6 + 25 and first["status"] == "ok"
    ag = {r: fac.dump([*[fac.entry(i, 1, "_broadcast_oop", t_s=0.1, sizes=[[i + 1, 2]]) for i in range(2)],
                       fac.entry(2, 1, "ALLGATHER_coalesced", t_s=0.1, done_s=0.2, sizes=[])], world_size=2) for r in (0, 1)}
    g = trace_from_dumps(dumps_of(ag, 2))
    assert g["name"].tolist() == ["ALLGATHER_COALESCED"] * 2 and g["numel"].tolist() == [6, 6]
    p2p = {r: fac.dump([fac.entry(0, 0, "send 0->1" if r == 0 else "recv 1<-0", t_s=0.1, done_s=0.2, is_p2p=True, p2p_seq=1)],
                       world_size=2) for r in (0, 1)}
    p = trace_from_dumps(dumps_of(p2p, 2))
    assert set(p["pg"]) == {"0:p2p"} and set(p["name"]) == {"SEND", "RECV"} and (p["seq"] == 1).all()


@pytest.mark.parametrize(("job", "ws", "verdict", "culprits", "op"), [
    (lambda: fac.rank0_late_job(), 4, Verdict.MISSING_RANK, (0,), "BARRIER"),
    (lambda: fac.rank0_late_job("gloo", late_s=4.8, timeout_ms=3000), 4, Verdict.LATE_RANK, (0,), "BARRIER"),
    (lambda: fac.rank0_late_job("gloo", late_rank=2, timeout_ms=3000), 4, Verdict.MISSING_RANK, (2,), "BARRIER"),
    (lambda: fac.mismatch_job(), 4, Verdict.MISMATCH, (2,), "ALLREDUCE"),
    (lambda: fac.mismatch_job("gloo"), 4, Verdict.MISMATCH, (2,), "ALLREDUCE"),
    (lambda: fac.healthy_job(), 4, Verdict.OK, (), None),
    (lambda: fac.healthy_job("gloo"), 4, Verdict.OK, (), None),
    # gloo: with rank 3's dump missing nobody can tell the last collective completed; rank 3 is named
    (lambda: {r: d for r, d in fac.healthy_job("gloo").items() if r != 3}, 4, Verdict.MISSING_RANK, (3,), "ALLREDUCE"),
    # NCCL: the others' entries are completed, so no collective failed; the diagnosis does not guess
    (lambda: {r: d for r, d in fac.healthy_job().items() if r != 3}, 4, Verdict.UNKNOWN, (), None),
])
def test_diagnosis_from_dumps(job, ws: int, verdict: Verdict, culprits: tuple[int, ...], op: str | None) -> None:  # noqa: ANN001
    d = diagnose_dumps(dumps_of(job(), ws))
    assert (d.verdict, d.culprit_ranks, d.failed_op) == (verdict, culprits, op)
    if verdict is not Verdict.UNKNOWN:
        assert "flight-recorder dumps" in d.evidence[-1]


def test_rank_without_a_dump_while_others_wait_is_the_culprit() -> None:
    job = {r: d for r, d in fac.rank0_late_job("gloo", timeout_ms=3000).items() if r != 0}
    d = diagnose_dumps(dumps_of(job, 4))
    assert d.verdict is Verdict.MISSING_RANK and d.culprit_ranks == (0,) and d.failed_op == "BARRIER"


def test_gloo_late_rank_cut_at_the_timeout_becomes_a_missing_rank() -> None:
    cut = as_of_first_timeout(gloo_late(4.8))
    d = diagnose_dumps(cut)
    assert (d.verdict, d.culprit_ranks) == (Verdict.MISSING_RANK, (0,))
    v = run_torch_analyzer(fix_for_torch(cut))
    assert v.status is AnalyzerStatus.MISSING_RANKS and v.missing_ranks == (0,)


@settings(max_examples=25, deadline=None)
@given(ws=st.integers(2, 6), late=st.integers(0, 5), late_s=st.one_of(st.none(), st.floats(3.5, 100)),
       backend=st.sampled_from(["gloo", "nccl"]), steps=st.integers(0, 4))
def test_property_the_late_or_missing_rank_is_named(ws: int, late: int, late_s: float | None, backend: str, steps: int) -> None:
    late %= ws
    if backend == "nccl" and late_s is not None:
        late_s = None  # NCCL dumps are taken at the timeout: the late rank has not arrived yet
    d = diagnose_dumps(dumps_of(fac.rank0_late_job(backend, world_size=ws, late_rank=late, late_s=late_s, steps=steps,
                                                   timeout_ms=3000)))
    assert d.culprit_ranks == (late,) and d.failed_op == "BARRIER"
    assert d.verdict is (Verdict.MISSING_RANK if late_s is None else Verdict.LATE_RANK)


def test_timeline_plot_works_on_dumps() -> None:
    fig = plots.timeline(trace_from_dumps(gloo_late()), title="flight recorder")
    assert fig.axes and fig.axes[0].get_xlabel() == "time since the run's first event (s)"


def test_trace_frame_keeps_nanoseconds_exact_next_to_missing_values() -> None:
    t = fac.T0 + 123_456_789  # not a multiple of 256: float64 would round it
    df = trace_frame([TraceRow(rank=0, kind="collective", name="BARRIER", pg="0", seq=1, t_enqueue_ns=t, t_start_ns=t,
                               t_end_ns=t + 1, status="ok"),
                      TraceRow(rank=1, kind="collective", name="BARRIER", pg="0", seq=1, t_enqueue_ns=t, t_start_ns=t,
                               status="running")])
    assert int(df.loc[df["rank"] == 0, "t_end_ns"].iloc[0]) == t + 1


# -- from a run, the report, the CLI ----------------------------------------------------------


def _run(fr_dumps: dict[int, bytes]) -> RunResult:
    return RunResult("rank0-work-before-barrier", "broken", "gloo", 4, 3.0, Outcome.TIMEOUT, (0,), (0,), "BARRIER",
                     "BARRIER", (), 5.0, fr_dumps=fr_dumps)


def test_dumps_from_a_run_result(tmp_path: Path) -> None:
    job = fac.rank0_late_job("gloo", late_s=4.8, timeout_ms=3000)
    result = _run({r: pickle.dumps(d, protocol=2) for r, d in job.items()})
    dumps = dumps_from_result(result)
    assert dumps.ranks == (0, 1, 2, 3) and dumps.source == "rank0-work-before-barrier [broken]"
    assert [p.name for p in write_dumps(result, tmp_path)] == [f"{FR_FILE_PREFIX}{r}" for r in range(4)]
    with pytest.raises(FlightDumpError, match="flight_recorder=True"):
        dumps_from_result(_run({}))


def test_report_holds_both_verdicts_and_renders() -> None:
    rep = analyze_dumps(gloo_late(4.8))
    assert rep.analyzer_as_is is not None and rep.analyzer_as_is.status is AnalyzerStatus.CRASHED
    assert rep.analyzer.status is AnalyzerStatus.NO_ISSUE and rep.fixups
    assert rep.diagnosis.culprit_ranks == (0,) and not rep.as_of_first_timeout
    j = rep.to_json()
    assert j["torch_analyzer"]["status"] == "no_issue" and j["torch_analyzer_as_is"]["status"] == "crashed"
    assert j["diagnosis"]["culprit_ranks"] == [0] and json.dumps(j)
    text = rep.render()
    assert "as is: torch's analyzer crashed: KeyError" in text and "workbook diagnosis: late_rank; culprit ranks [0]" in text
    assert "<pre>" in rep._repr_html_()
    cut = analyze_dumps(gloo_late(4.8), cut_at_first_timeout=True)
    assert cut.as_of_first_timeout and cut.analyzer.missing_ranks == (0,)
    assert cut.diagnosis.verdict is Verdict.MISSING_RANK
    assert "<table" in gloo_late()._repr_html_() and isinstance(gloo_late().summary(), pd.DataFrame)


def test_cli_fr_text_and_json_on_the_nccl_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fr", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "missing ranks [0]" in out and "workbook diagnosis: missing_rank; culprit ranks [0]; op BARRIER" in out
    assert main(["flight-recorder", str(FIXTURE), "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["backend"] == "nccl" and j["torch_analyzer"]["status"] == "missing_ranks"
    assert j["torch_analyzer_as_is"] is None and j["diagnosis"]["culprit_ranks"] == [0]


def test_cli_fr_gloo_folder_with_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_dumps(gloo_late(4.8), tmp_path)
    assert main(["fr", str(tmp_path), "--as-of-first-timeout", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["as_of_first_timeout"] and j["torch_analyzer"]["missing_ranks"] == [0]
    assert j["torch_analyzer_as_is"]["status"] == "crashed"


@pytest.mark.parametrize(("argv", "message"), [
    (["fr", "/no/such/folder"], "is not a folder"),
    (["fr", str(Path(__file__).parent)], "no dump files"),
    (["fr", str(FIXTURE), "--world-size", "0"], "--world-size must be at least 1"),
    (["fr", str(FIXTURE), "--world-size", "2"], "smaller than the highest rank"),
])
def test_cli_fr_bad_input_exits_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_registers_fr() -> None:
    assert build_parser().parse_args(["fr", "x"]).func.__name__ == "run_fr"


def test_fix_up_renumbers_when_engines_numbered_differently() -> None:
    # engines with different histories (a replacement engine, a shared cluster) start the run's
    # entries at different record ids; the analyzer aligns ranks by record_id
    job = fac.rank0_late_job("gloo", late_s=4.8, timeout_ms=3000)
    for e in job[2]["entries"]:
        e["record_id"] += 57
    dumps = dumps_of(job)
    fixed = fix_for_torch(dumps)
    firsts = {fixed[r].raw["entries"][0]["record_id"] for r in fixed.ranks}
    assert firsts == {0}
    assert any("renumbered record_id" in n for n in fixed.notes)
    assert run_torch_analyzer(fixed).status == run_torch_analyzer(fix_for_torch(gloo_late())).status
