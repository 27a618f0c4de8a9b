"""init-rendezvous-timeout without a cluster: naming the rank that never arrived from synthetic
regions, the params, the registry entry, and the fixes on one process (a 1-rank gloo group, a
2-rank store barrier on an in-process TCPStore)."""

from __future__ import annotations

import datetime
import threading

import pytest
import torch.distributed as dist

from nccl_workbook import fixes
from nccl_workbook.scenarios import get_scenario
from nccl_workbook.scenarios.init_rendezvous_timeout import Params, ResetProbe, never_arrived
from nccl_workbook.trace import TraceRow
from tests.unit.factories import S, frame


def region(rank: int, name: str, t_s: float, end_s: float | None, status: str = "ok") -> TraceRow:
    return TraceRow(rank=rank, kind="region", name=name, t_enqueue_ns=int(t_s * S), t_start_ns=int(t_s * S),
                    t_end_ns=None if end_s is None else int(end_s * S), status=status)


def test_never_arrived_names_the_rank_that_began_init_after_the_others_failed() -> None:
    rows = [region(r, "init_process_group", 0.2, 3.2, "timeout") for r in (0, 1, 3)]
    rows += [region(2, "prepare_data", 0.0, 6.0), region(2, "init_process_group", 6.0, 9.6, "error")]
    assert never_arrived(frame(rows), world_size=4) == (2,)


def test_never_arrived_counts_a_rank_without_an_init_region() -> None:
    rows = [region(r, "init_process_group", 0.2, 3.2, "timeout") for r in (0, 1, 2)]
    assert never_arrived(frame(rows), world_size=4) == (3,)


def test_never_arrived_is_empty_when_init_succeeded_even_late() -> None:
    # long-init-then-short: rank 2 began init 5.8 s late, but the long timeout waited for it
    rows = [region(r, "init_process_group", 0.0, 5.8) for r in (0, 1, 3)] + [region(2, "init_process_group", 5.8, 5.8)]
    assert never_arrived(frame(rows), world_size=4) == ()


def test_params_and_registry() -> None:
    s = get_scenario("init-rendezvous-timeout")
    assert s.variant_names == ["broken", "prepare-after-init", "long-init-then-short", "store-barrier"]
    assert s.init_group is False and s.notebook == "11_init_rendezvous_timeout.ipynb"
    p = s.params_for("broken")
    assert p.prepare_s == 2 * s.default_timeout_s and s.expected_culprits(p, 4) == (2,)
    assert s.params_for("store-barrier").init == "store-barrier"
    with pytest.raises(ValueError, match="init must be one of"):
        Params(init="later")
    with pytest.raises(ValueError, match="short_s < late_s < long_s"):
        ResetProbe(short_s=3.0, late_s=2.0)


def test_fixes_are_exported() -> None:
    for name in ("set_group_timeout", "store_barrier", "prepare_after_init", "open_store", "StoreBarrierTimeout"):
        assert name in fixes.__all__


@pytest.fixture
def one_rank_group():  # noqa: ANN201
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_set_group_timeout_reads_back(one_rank_group: None) -> None:
    assert fixes.group_timeout_s() == 30.0
    assert fixes.set_group_timeout(4.0) == 4.0
    assert fixes.group_timeout_s() == 4.0
    g = dist.new_group(timeout=datetime.timedelta(seconds=50))
    assert fixes.set_group_timeout(2.5, g) == 2.5 and fixes.group_timeout_s() == 4.0
    with pytest.raises(ValueError):
        fixes.set_group_timeout(0)


def test_prepare_after_init_returns_the_result(one_rank_group: None) -> None:
    assert fixes.prepare_after_init(lambda n: n * 2, 21, timeout_s=5) == 42


def test_store_barrier_names_the_missing_rank() -> None:
    store = dist.TCPStore("127.0.0.1", 0, 3, True, timeout=datetime.timedelta(seconds=5), wait_for_workers=False)
    # ranks 0 and 1 arrive, rank 2 never does
    errors: list[BaseException] = []

    def rank1() -> None:
        try:
            fixes.store_barrier(store, rank=1, world_size=3, timeout_s=0.3, key="t1")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=rank1)
    t.start()
    with pytest.raises(fixes.StoreBarrierTimeout, match=r"rank\(s\) 2 did not arrive within 0.3 s") as info:
        fixes.store_barrier(store, rank=0, world_size=3, timeout_s=0.3, key="t1")
    t.join(5)
    assert info.value.missing == (2,) and isinstance(errors[0], fixes.StoreBarrierTimeout)


def test_store_barrier_passes_when_all_arrive() -> None:
    store = dist.TCPStore("127.0.0.1", 0, 2, True, timeout=datetime.timedelta(seconds=5), wait_for_workers=False)
    store.set("t2/1", "1")  # rank 1 already came
    assert fixes.store_barrier(store, rank=0, world_size=2, timeout_s=1, key="t2") < 1
    with pytest.raises(ValueError, match="rank 5"):
        fixes.store_barrier(store, rank=5, world_size=2, timeout_s=1)


def test_a_failed_init_leaves_the_group_name_counter_as_it_was() -> None:
    """torch 2.13 counts the default group's name up even when init fails; the scenario's init
    restores it, so an engine's next init uses the name a fresh engine would."""
    import socket
    from types import SimpleNamespace

    import torch
    import torch.distributed.distributed_c10d as c10d

    from nccl_workbook.scenarios.init_rendezvous_timeout import _init
    from nccl_workbook.trace import Tracer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens there once the socket is closed
    tracer = Tracer(1)
    ctx = SimpleNamespace(rank=1, world_size=2, backend="gloo", device=torch.device("cpu"),
                          init_method=f"tcp://127.0.0.1:{port}", tracer=tracer)
    before = c10d._world.group_count
    with pytest.raises(Exception, match="timed out"):
        _init(ctx, 0.5)
    assert c10d._world.group_count == before and not dist.is_initialized()
    assert [(r.name, r.status) for r in tracer.rows] == [("init_process_group", "error")]
