"""Live hang detection: the rule on synthetic rank states, and publisher -> hub on a real store."""

from __future__ import annotations

import time

from nccl_workbook.live import ProgressPublisher, RankProgress, short_paths
from nccl_workbook.observer import ProgressHub, detect_hang
from nccl_workbook.render import stacks_html
from nccl_workbook.trace import TraceRow

S = 1_000_000_000


def _waiting(rank: int, since_s: float, *, op: str = "BARRIER", pg: str = "0", seq: int = 4) -> RankProgress:
    return RankProgress(rank, int(since_s * S), coll_op=op, coll_pg=pg, coll_seq=seq, coll_since_ns=int(since_s * S),
                        entered={pg: seq}, completed={pg: seq - 1}, coll_latency_median_ns=2_000_000)


def test_late_rank_named_after_min_wait() -> None:
    states = {r: _waiting(r, 10.0) for r in (1, 2, 3)}
    states[0] = RankProgress(0, 10 * S, region="generate_samples", region_since_ns=10 * S, entered={"0": 3})
    assert detect_hang(states, world_size=4, now_ns=int(10.5 * S)) is None  # 0.5 s: too early
    h = detect_hang(states, world_size=4, now_ns=int(11.2 * S))
    assert h is not None and h.culprit_ranks == (0,) and h.waiting_ranks == (1, 2, 3)
    assert h.op == "BARRIER" and h.kind == "late" and abs(h.detected_after_s - 1.2) < 1e-9
    assert "generate_samples" in h.where[0]


def test_threshold_scales_with_usual_latency() -> None:
    slow = {r: RankProgress(**{**_waiting(r, 0.0).__dict__, "coll_latency_median_ns": 200_000_000}) for r in (1, 2)}
    # 20 x 0.2 s = 4 s: a 2 s wait is still normal for this job
    assert detect_hang(slow, world_size=3, now_ns=2 * S) is None
    assert detect_hang(slow, world_size=3, now_ns=5 * S).culprit_ranks == (0,)


def test_rank_without_progress_counts_as_absent_and_done_rank_does_not() -> None:
    states = {r: _waiting(r, 0.0) for r in (0, 1)}
    assert detect_hang(states, world_size=3, now_ns=2 * S).culprit_ranks == (2,)
    # rank 2 already passed seq 4 (entered it): it cannot be what 0 and 1 wait for
    states[2] = RankProgress(2, 0, entered={"0": 5}, completed={"0": 4})
    assert detect_hang(states, world_size=3, now_ns=2 * S) is None


def test_mismatch_names_the_minority() -> None:
    states = {r: _waiting(r, 0.0, op="ALLREDUCE") for r in (0, 1, 2)}
    states[3] = _waiting(3, 0.0, op="ALLGATHER")
    h = detect_hang(states, world_size=4, now_ns=2 * S)
    assert h.kind == "mismatch" and h.culprit_ranks == (3,) and h.op == "ALLREDUCE"


def test_publisher_to_hub_round_trip() -> None:
    hub = ProgressHub()
    pub = ProgressPublisher(hub.address, "run1", rank=1)
    try:
        t = time.time_ns()
        pub.on_event(TraceRow(rank=1, kind="step", name="step", step=0, t_enqueue_ns=t, t_start_ns=t, status="running"))
        pub.on_event(TraceRow(rank=1, kind="collective", name="ALLREDUCE", pg="0", seq=1, step=0, numel=4, nbytes=16,
                              t_enqueue_ns=t, t_start_ns=t, status="running"))
        deadline = time.monotonic() + 3
        states = {}
        while time.monotonic() < deadline:
            states = hub.read("run1", 2)
            if 1 in states and states[1].coll_op:
                break
            time.sleep(0.02)
        assert states[1].coll_op == "ALLREDUCE" and states[1].entered == {"0": 1} and states[1].step == 0
        assert 0 not in states
        stacks = hub.request_stacks("run1", 2, timeout_s=2)
        assert "test_publisher_to_hub_round_trip" in stacks[1]  # the main thread's stack
        assert "no answer" in stacks[0]
    finally:
        pub.close()


def test_paths_and_html() -> None:
    text = 'File "/x/lib/python3.11/site-packages/torch/distributed/c10d.py", line 5, in barrier'
    assert short_paths(text) == 'File "torch/distributed/c10d.py", line 5, in barrier'
    html = stacks_html({0: "a\nb", 1: "<c>"}, where={0: "in region 'x'"})
    assert "rank 0" in html and "&lt;c&gt;" in html and "in region" in html


def test_a_wait_across_two_groups_names_the_ranks_missing_from_the_group_that_fails_first() -> None:
    """Notebook 06: ranks 0, 1 wait in the main group's 4th ALLGATHER (3 s timeout) for ranks 2, 3,
    which already wait on a side group (30 s timeout) for ranks 0, 1; the side wait began first."""
    timeouts = {"0": 3.0, "1": 30.0}

    def state(r: int, pg: str, seq: int, since_s: float, entered: dict[str, int]) -> RankProgress:
        return RankProgress(r, 0, coll_op="ALLGATHER", coll_pg=pg, coll_seq=seq, coll_since_ns=int(since_s * S),
                            entered=entered, completed={k: v - 1 for k, v in entered.items()}, pg_timeouts_s=timeouts)

    states = {0: state(0, "0", 4, 10.2, {"0": 4, "1": 1}), 1: state(1, "0", 4, 10.2, {"0": 4, "1": 1}),
              2: state(2, "1", 2, 10.0, {"0": 3, "1": 2}), 3: state(3, "1", 2, 10.0, {"0": 3, "1": 2})}
    h = detect_hang(states, world_size=4, now_ns=int(11.3 * S))
    assert h.kind == "cross_group" and (h.pg, h.seq) == ("0", 4) and h.culprit_ranks == (2, 3)
    assert h.waiting_ranks == (0, 1) and "across process groups" in h.message and "pg 1, seq 2" in h.message
    # without the groups' timeouts: the wait that began first
    blind = {r: RankProgress(**{**s.__dict__, "pg_timeouts_s": {}}) for r, s in states.items()}
    h2 = detect_hang(blind, world_size=4, now_ns=int(11.3 * S))
    assert h2.kind == "cross_group" and h2.pg == "1" and h2.culprit_ranks == (0, 1)


def test_tracer_reports_each_groups_timeout() -> None:
    import datetime

    import torch
    import torch.distributed as dist

    from nccl_workbook.trace import Tracer

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=datetime.timedelta(seconds=7))
    try:
        seen: dict[str, float] = {}
        tracer = Tracer(0)
        tracer.on_group = seen.__setitem__
        side = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=42))
        with tracer.installed():
            dist.all_reduce(torch.ones(1))
            dist.barrier(group=side)
            dist.all_reduce(torch.ones(1))
        assert sorted(seen.values()) == [7.0, 42.0] and len(seen) == 2
    finally:
        dist.destroy_process_group()


def test_clock_sync_estimates_a_hosts_lead_and_the_observer_applies_it() -> None:
    from nccl_workbook.observer import RunObserver

    hub = ProgressHub()
    pub = ProgressPublisher(hub.address, "clk", rank=0, clock_sync=True)
    store = hub._store
    try:
        deadline = time.monotonic() + 10
        while not store.check(["clk/offset/0"]) and time.monotonic() < deadline:
            if store.check(["clk/ping/0"]):  # what watch's poll loop does, with a clock 2 s behind
                i = store.get("clk/ping/0").decode()
                store.set(f"clk/pong/0/{i}", str(time.time_ns() - 2 * S))
            time.sleep(0.01)
        lead = int(store.get("clk/offset/0"))
        assert abs(lead - 2 * S) < 0.1 * S  # this "host" runs 2 s ahead of the hub
        obs = RunObserver(1, hub=hub, run_id="clk")
        t = time.time_ns()
        pub.on_event(TraceRow(rank=0, kind="step", name="step", step=0, t_enqueue_ns=t, t_start_ns=t, status="running"))
        deadline = time.monotonic() + 3
        while (0 not in obs.states() or obs.states()[0].step_since_ns is None) and time.monotonic() < deadline:
            time.sleep(0.02)
        obs.offsets_ns[0] = lead
        assert abs(obs.states()[0].step_since_ns - (t - lead)) < 1000
    finally:
        pub.close()
