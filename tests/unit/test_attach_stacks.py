"""attach's pure part on real py-spy dumps (tests/data/stacks, see its README): parsing, where each
rank is, the groups and the verdict; merging hosts' JSON; the CLI's handling of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_workbook.attach import AttachError, load_report, merge, report_from_dumps
from nccl_workbook.attach.procs import Job, RankProcess, pick_job
from nccl_workbook.attach.stacks import (NOT_RUNNING, Place, RankPlace, State, classify, format_ranks, group_ranks,
                                         is_library_path, parse_dump, verdict)
from nccl_workbook.cli import main

STACKS = Path(__file__).resolve().parents[1] / "data" / "stacks"


def dumps(case: str, suffix: str = "") -> dict[int, str]:
    """{rank: text} of one captured case (``suffix``: ``.native``, ``.0``, ``.1.native``…)."""
    return {r: (STACKS / case / f"rank{r}{suffix}.txt").read_text() for r in range(4)}


def place(case: str, rank: int, suffix: str = "") -> Place:
    return classify(parse_dump((STACKS / case / f"rank{rank}{suffix}.txt").read_text()))


# -- parsing -------------------------------------------------------------------------------------


def test_parse_dump_reads_process_threads_and_frames() -> None:
    d = parse_dump((STACKS / "stall-data-workers" / "rank0.txt").read_text())
    assert d.pid == int(d.threads[0].ident)
    assert d.script is not None and d.script.endswith("train_ddp.py")
    assert [t.name for t in d.threads] == ["MainThread", "QueueFeederThread", "QueueFeederThread"]
    main = d.main_thread()
    assert main is not None and main.idle
    assert [f.function for f in main.frames][:3] == ["_engine_run_backward", "backward", "Tensor.backward"]
    assert main.frames[-2].where == "train_ddp.py:237"


def test_parse_dump_native_frames_with_parentheses_in_cpp_names() -> None:
    d = parse_dump((STACKS / "stall-data" / "rank0.native.txt").read_text())
    frames = d.main_thread().frames
    natives = [f for f in frames if f.native]
    assert any(f.function == "c10d::Reducer::finalize_backward" for f in natives)
    # "std::_Function_handler<void (), ...>::_M_invoke (lib.so)": the location is the last group
    handler = next(f for f in natives if f.function.startswith("std::_Function_handler"))
    assert handler.path.endswith("libtorch_cpu.so") and handler.line is None
    assert [f.where for f in frames if not f.native][-2:] == ["train_ddp.py:237", "train_ddp.py:260"]


def test_parse_dump_of_garbage_has_no_threads() -> None:
    d = parse_dump("Error: Failed to find python version from target process\n")
    assert d.threads == () and d.main_thread() is None
    assert classify(d).state is State.UNKNOWN


def test_library_paths() -> None:
    assert is_library_path("/v/lib/python3.11/site-packages/torch/_tensor.py")
    assert is_library_path("/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py")
    assert is_library_path("torch/autograd/graph.py")  # py-spy without --full-filenames
    assert not is_library_path("/home/me/train.py")
    # the process's own script counts as the user's, even when installed as a package
    script = "/v/lib/python3.11/site-packages/nccl_workbook/examples/train_ddp.py"
    assert not is_library_path(script, script)


# -- where each rank is ------------------------------------------------------------------------

DDP_WAIT = Place(state=State.COLLECTIVE, op="ALLREDUCE", via="DDP backward", function="main",
                 frame="train_ddp.py:237")


@pytest.mark.parametrize("suffix", ["", ".native"])
def test_stall_data_places(suffix: str) -> None:
    for r in (0, 2, 3):
        assert place("stall-data", r, suffix).key == DDP_WAIT.key
    p1 = place("stall-data", 1, suffix)
    assert (p1.state, p1.function, p1.frame) == (State.DATA, "TokenShards.read_block", "train_ddp.py:108")
    assert p1.callers == ("__getitem__:103", "main:220")


def test_dataloader_workers_queue_get_is_data_loading() -> None:
    p = place("stall-data-workers", 2)
    assert (p.state, p.frame) == (State.DATA, "train_ddp.py:220")


def test_explicit_collective_names_the_op_and_what_the_user_called() -> None:
    p = place("collectives", 0)
    assert (p.state, p.op, p.via, p.frame) == (State.COLLECTIVE, "ALLGATHER", "all_gather_object", "collectives.py:32")
    assert p.describe() == "in ALLGATHER (all_gather_object) at collectives.py:32"
    barrier = place("skip-step", 3)
    assert (barrier.op, barrier.frame) == ("BARRIER", "train_ddp.py:254")
    assert barrier.describe() == "in BARRIER at train_ddp.py:254"  # "(barrier)" would add nothing


def test_sleep_is_seen_in_native_frames_only() -> None:
    assert place("collectives", 2, ".native").state is State.SLEEP
    python_only = place("collectives", 2)
    assert python_only.state is State.BLOCKED  # idle in the user's own frame: a C call that waits
    assert python_only.describe() == "blocked (sleep, lock or I/O) in compute_metrics at collectives.py:17 (< main:32)"


def test_backward_with_native_frames_but_no_reducer_is_compute() -> None:
    # healthy rank 2, second sample: in backward, computing (no c10d:: frame); the first: the reducer waits
    assert place("healthy", 2, ".1.native").state is State.COMPUTE
    assert place("healthy", 2, ".0.native").key == DDP_WAIT.key


def test_rank0_eval_is_computing_in_the_evaluation() -> None:
    p = place("rank0-eval", 0, ".0")
    assert (p.state, p.function, p.frame) == (State.COMPUTE, "TinyLM.forward", "train_ddp.py:130")
    assert p.callers[0] == "estimate_loss:150"


# -- groups and verdicts -------------------------------------------------------------------------


def test_verdict_stall_data() -> None:
    rep = report_from_dumps(dumps("stall-data"), world_size=4, stuck=dict.fromkeys(range(4), True))
    assert rep.culprit_ranks == (1,)
    assert rep.message == ("ranks 0, 2, 3 in ALLREDUCE (DDP backward) at train_ddp.py:237; rank 1 loading data in "
                           "TokenShards.read_block at train_ddp.py:108 (< __getitem__:103 < main:220)")
    assert [g.ranks for g in rep.verdict.groups] == [(0, 2, 3), (1,)]


def test_verdict_rank0_eval_with_rank0_moving() -> None:
    rep = report_from_dumps(dumps("rank0-eval", ".1"), world_size=4, stuck={0: False, 1: True, 2: True, 3: True})
    assert rep.culprit_ranks == (0,)
    assert rep.message.startswith("ranks 1-3 in ALLREDUCE (DDP backward) at train_ddp.py:237; rank 0 computing in "
                                  "estimate_loss at train_ddp.py:149")


def test_verdict_skip_step_and_explicit_collectives() -> None:
    rep = report_from_dumps(dumps("skip-step"), world_size=4)  # one snapshot: stuck unknown
    assert rep.culprit_ranks == (3,)
    assert rep.message == "ranks 0-2 in ALLREDUCE (DDP backward) at train_ddp.py:237; rank 3 in BARRIER at train_ddp.py:254"
    rep = report_from_dumps(dumps("collectives", ".native"), world_size=4)
    assert rep.culprit_ranks == (2,)
    assert rep.message == ("ranks 0, 1, 3 in ALLGATHER (all_gather_object) at collectives.py:32; "
                           "rank 2 sleeping in compute_metrics at collectives.py:17 (< main:32)")


def test_verdict_healthy_job_names_nobody() -> None:
    for suffix in (".0", ".1"):
        rep = report_from_dumps(dumps("healthy", suffix), world_size=4, stuck=dict.fromkeys(range(4), False))
        assert rep.culprit_ranks == ()
        assert rep.message.startswith("no rank is stuck in a collective: the job is making progress (just now: ")


def test_a_single_snapshot_of_a_healthy_job_can_mislead_which_is_why_attach_watches() -> None:
    # sample 1: rank 3 happened to be in backward while the others slept -> without progress
    # information it looks like the others are late
    rep = report_from_dumps(dumps("healthy", ".1"), world_size=4)
    assert rep.culprit_ranks == (0, 1, 2)


def test_all_ranks_waiting_together_and_missing_ranks() -> None:
    wait = [RankPlace(rank=r, place=DDP_WAIT, stuck=True) for r in range(4)]
    v = verdict(wait, world_size=4)
    assert v.culprit_ranks == () and v.message.startswith("all 4 ranks in ALLREDUCE (DDP backward)")
    v = verdict(wait, world_size=8)
    assert v.culprit_ranks == (4, 5, 6, 7) and v.missing_ranks == (4, 5, 6, 7)
    assert "ranks 4-7 not seen on the hosts attached" in v.message
    v = verdict(wait[:3], world_size=4, missing_reason=NOT_RUNNING)  # a single-host job lost rank 3
    assert v.culprit_ranks == (3,) and v.message.endswith("rank 3 not running (exited or crashed?): the ones the others wait for")


def test_tie_between_waiting_groups_names_nobody() -> None:
    other = Place(state=State.COLLECTIVE, op="BARRIER", via="barrier", frame="t.py:9")
    ranks = [RankPlace(rank=0, place=DDP_WAIT), RankPlace(rank=1, place=DDP_WAIT),
             RankPlace(rank=2, place=other), RankPlace(rank=3, place=other)]
    v = verdict(ranks, world_size=4)
    assert v.culprit_ranks == () and v.message.startswith("ranks wait in different collectives")


def test_group_order_and_rank_lists() -> None:
    computing = Place(state=State.COMPUTE, function="f", frame="t.py:1")
    ranks = [RankPlace(rank=5, place=computing, stuck=False)] + [RankPlace(rank=r, place=DDP_WAIT, stuck=True)
                                                                 for r in (0, 1, 2, 3, 4, 6)]
    groups = group_ranks(ranks)
    assert [g.ranks for g in groups] == [(0, 1, 2, 3, 4, 6), (5,)] and groups[0].waiting
    assert format_ranks((0, 1, 2, 3, 4, 6)) == "ranks 0-4, 6"
    assert format_ranks([7]) == "rank 7" and format_ranks([1, 2]) == "ranks 1, 2"


# -- JSON, merge, CLI --------------------------------------------------------------------------


def test_json_contract_and_merge_of_two_hosts(tmp_path: Path) -> None:
    all4 = dumps("stall-data")
    stuck = dict.fromkeys(range(4), True)
    a = report_from_dumps({r: all4[r] for r in (0, 1)}, world_size=4, host="node-a", stuck=stuck, job="run x")
    b = report_from_dumps({r: all4[r] for r in (2, 3)}, world_size=4, host="node-b", stuck=stuck, job="run x")
    ja = a.to_json()
    assert {"ranks", "groups", "culprit_ranks", "message"} <= set(ja)
    assert {"rank", "pid", "host", "state", "op", "frame", "stack"} <= set(ja["ranks"][0])
    assert {"ranks", "frame"} <= set(ja["groups"][0])
    assert a.verdict.missing_ranks == (2, 3)  # one host alone sees half the job
    (tmp_path / "a.json").write_text(json.dumps(ja))
    (tmp_path / "b.json").write_text(json.dumps(b.to_json()))
    merged = merge([load_report(tmp_path / "a.json"), load_report(tmp_path / "b.json")])
    whole = report_from_dumps(all4, world_size=4, stuck=stuck)
    assert merged.message == whole.message and merged.culprit_ranks == (1,)
    assert merged.hosts == ("node-a", "node-b") and merged.job == "run x"
    assert [r.host for r in merged.ranks] == ["node-a", "node-a", "node-b", "node-b"]


def test_cli_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    all4 = dumps("skip-step")
    for host, rs in (("a", (0, 1)), ("b", (2, 3))):
        rep = report_from_dumps({r: all4[r] for r in rs}, world_size=4, host=host)
        (tmp_path / f"{host}.json").write_text(json.dumps(rep.to_json()))
    assert main(["attach", "--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["culprit_ranks"] == [3] and out["hosts"] == ["a", "b"]
    assert main(["attach", "--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("rank 3 in BARRIER at train_ddp.py:254")


def test_cli_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.json").write_text("[1, 2]")
    assert main(["attach", "--merge", str(tmp_path / "x.json")]) == 2
    assert "is not the JSON of `nccl-workbook attach --json`" in capsys.readouterr().err
    assert main(["attach", "--merge", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    import nccl_workbook.attach as attach_mod

    monkeypatch.setattr(attach_mod, "find_jobs", lambda: ([], 0))
    assert main(["attach"]) == 1
    assert "no distributed job found on this host" in capsys.readouterr().err


def _job(key: str, pids: list[int], launcher: int) -> Job:
    ranks = tuple(RankProcess(rank=i, pid=p, world_size=len(pids), local_rank=i) for i, p in enumerate(pids))
    return Job(key=key, ranks=ranks, launcher_pid=launcher, launcher="torchrun x.py",
               all_pids=frozenset([*pids, launcher, pids[0] + 1000]))


def test_pick_job() -> None:
    a, b = _job("run a", [11, 12], 10), _job("run b", [21, 22], 20)
    assert pick_job([a]) is a
    assert pick_job([a, b], 22) is b and pick_job([a, b], 10) is a
    assert pick_job([a, b], 1011) is a  # a child of a rank (a DataLoader worker)
    with pytest.raises(AttachError, match="2 distributed jobs run on this host; pick one with --pid"):
        pick_job([a, b])
    with pytest.raises(AttachError, match="pid 99 is not a rank, launcher or child"):
        pick_job([a, b], 99)
    with pytest.raises(AttachError, match="no distributed job found"):
        pick_job([])
