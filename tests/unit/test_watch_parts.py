"""``watch``'s parts without a job: the tracer's bounded window and rotating spill, step marks, the
DDP/optimizer hooks on a 1-rank group, the bootstrap's chaining, the report's JSON contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from nccl_workbook.observer import HangReport
from nccl_workbook.trace import Tracer, read_spill, trace_frame
from nccl_workbook.watch.command import BOOTSTRAP_DIR, _culprits, _first_failure, _innermost
from nccl_workbook.watch.report import RankEnd, WatchReport, chrome_trace, stall_json


@pytest.fixture()
def group() -> None:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_tracer_keeps_a_window_and_rotates_its_spill(group: None, tmp_path: Path) -> None:
    path = str(tmp_path / "rank0.jsonl")
    tracer = Tracer(0, spill=path, max_rows=10, spill_max_bytes=4000)
    with tracer.installed():
        for _ in range(40):
            dist.all_reduce(torch.ones(2))
    tracer.close()
    assert len(tracer.rows) == 10 and tracer.rows[-1].seq == 40  # the newest rows only
    assert os.path.exists(path + ".1") and os.path.getsize(path + ".1") >= 4000
    back = read_spill(path)
    assert 0 < len(back) < 40 and back[-1].seq == 40 and all(r.status == "ok" for r in back)


def test_mark_step_opens_and_closes_steps(group: None) -> None:
    tracer = Tracer(0)
    with tracer.installed():
        dist.all_reduce(torch.ones(1))  # before step numbering starts: outside any step
        tracer.auto_steps()
        for _ in range(3):
            dist.all_reduce(torch.ones(1))  # opens the pending step
            tracer.mark_step()
    steps = [r for r in tracer.rows if r.kind == "step"]
    assert [(r.step, r.status) for r in steps] == [(0, "ok"), (1, "ok"), (2, "ok")]  # no open step after the last
    assert tracer.steps_done == 3 and len(tracer.step_times_ns) == 3
    colls = [r for r in tracer.rows if r.kind == "collective"]
    assert [r.step for r in colls] == [None, 0, 1, 2]


def test_ddp_gradients_and_optimizer_steps_are_seen(group: None) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from nccl_workbook.watch.hooks import mark_optimizer_steps, trace_ddp_gradients

    tracer = Tracer(0)
    undo = [trace_ddp_gradients(tracer), mark_optimizer_steps(tracer)]
    try:
        with tracer.installed():
            model = DDP(torch.nn.Linear(4, 4))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):
                model(torch.ones(2, 4)).sum().backward()
                opt.step()
            # a user's own hook wins: ours is not registered over it
            other = DDP(torch.nn.Linear(4, 4))
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            other.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)
            other(torch.ones(1, 4)).sum().backward()
    finally:
        for u in undo:
            u()
    grads = [r for r in tracer.rows if r.kind == "collective" and r.name == "ALLREDUCE"]
    assert len(grads) >= 3 and all(r.status == "ok" for r in grads)  # 2 steps of model + 1 of other
    assert tracer.steps_done == 2


def test_bootstrap_chains_to_an_existing_sitecustomize_and_stays_off_outside_ranks(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    code = ("import os, sys; import nccl_workbook.watch.agent as a; "
            "print(os.environ.get('USER_SITECUSTOMIZE_RAN'), a._agent is not None, 'torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([BOOTSTRAP_DIR, str(Path(__file__).resolve().parents[2]), str(user)]),
           "NCCL_WORKBOOK_WATCH": "127.0.0.1:9:run"}
    env.pop("RANK", None)
    off = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert off.stdout.split() == ["1", "False", "False"], off.stderr
    on = subprocess.run([sys.executable, "-c", code], env={**env, "RANK": "0", "WORLD_SIZE": "2"},
                        capture_output=True, text=True, timeout=60)
    # active in a rank, and torch still not imported before the script imports it
    assert on.stdout.split() == ["1", "True", "False"], on.stderr


def _stall(resolved: bool, **kw: object) -> HangReport:
    base = dict(op="ALLREDUCE", pg="0", seq=12, waiting_ranks=(1, 2, 3), culprit_ranks=(0,), detected_after_s=1.04,
                onset_ns=0, detected_ns=1_040_000_000, where={0: "in step 10 for 1.0 s", 1: "in ALLREDUCE"},
                stacks={0: 'File "t.py", line 3, in <module>\n    evaluate()\n'}, resolved=resolved,
                resolved_ns=3_100_000_000 if resolved else None)
    return HangReport(**{**base, **kw})  # type: ignore[arg-type]


def test_report_json_contract() -> None:
    ranks = (RankEnd(0, "h", 10, "ok", None, 29), RankEnd(1, "h", 11, "error", "ValueError: x", 4, t_end_ns=5))
    rep = WatchReport(command=("torchrun", "t.py"), exit_code=1, world_size=2, wall_s=3.21, ranks=ranks,
                      stalls=(_stall(True), _stall(False, seq=13)), first_failure=(1, "ValueError: x"), culprit_ranks=(1,))
    d = json.loads(json.dumps(rep.to_json()))
    assert set(d) >= {"command", "exit_code", "world_size", "wall_s", "ranks", "stalls", "first_failure", "culprit_ranks"}
    assert d["ranks"][1] == {"rank": 1, "host": "h", "pid": 11, "status": "error", "error": "ValueError: x", "steps": 4}
    s0, s1 = d["stalls"]
    assert set(s0) == {"op", "pg", "seq", "kind", "waiting_ranks", "culprit_ranks", "detected_after_s", "resolved",
                       "wait_s", "where", "stacks"}
    assert (s0["kind"], s0["resolved"], s0["wait_s"]) == ("late", True, 3.1)
    assert (s1["kind"], s1["resolved"], s1["wait_s"]) == ("missing", False, None)
    assert list(s0["where"]) == ["0", "1"] and d["first_failure"] == {"rank": 1, "error": "ValueError: x"}
    assert stall_json(_stall(False, kind="mismatch"))["kind"] == "mismatch"
    text = rep.to_text()
    assert "first failure: rank 1: ValueError: x" in text and "resolved: the wait lasted 3.1 s" in text


def test_first_failure_is_the_real_error_not_a_peer() -> None:
    ranks = [RankEnd(0, "h", 1, "peer_closed", "Connection closed by peer", 4, t_end_ns=1),
             RankEnd(1, "h", 2, "timeout", "RuntimeError: Timed out waiting 5000ms", 4, t_end_ns=2),
             RankEnd(2, "h", 3, "error", "ValueError: bad", 4, t_end_ns=3)]
    assert _first_failure(ranks) == (2, "ValueError: bad")
    assert _first_failure(ranks[:2]) == (1, "RuntimeError: Timed out waiting 5000ms")
    assert _first_failure(ranks[:1]) is None
    # a timeout on one rank is a symptom: the stall's missing rank is the culprit
    assert _culprits((1, "RuntimeError: Timed out waiting 5000ms"), (_stall(False),), None) == (0,)
    assert _culprits((2, "ValueError: bad"), (_stall(False),), None) == (2,)


def test_chrome_trace_and_stack_frames() -> None:
    from tests.unit.factories import coll, step

    df = trace_frame([step(0, 0, 0.0, 1.0), coll(0, 1, 0.2, 0.3), coll(1, 1, 0.25, None, "running")])
    events = chrome_trace(df)["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in xs} == {0, 1} and any(e["name"] == "step 0" and e["dur"] == 1e6 for e in xs)
    open_row = next(e for e in xs if e["pid"] == 1)
    assert open_row["dur"] == pytest.approx(0.75e6)  # until the end of the trace
    frames = _innermost('  File "a.py", line 1, in f\n    g()\n  File "b.py", line 2, in g\n    time.sleep(3)\n', 1)
    assert frames == ['File "b.py", line 2, in g: time.sleep(3)']
