"""The parts of the NCCL/CUDA fixes from the GPU session that can be checked without a GPU: the
fallbacks for torch 2.11 (no ``barrier(timeout=)``, no ``all_gather_single``), the device a fix puts
its own tensors on, and how a rank names the collective the watchdog timed out, from a real dump."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from nccl_workbook import health
from nccl_workbook.fixes import timeouts
from nccl_workbook.fixes._device import collective_device
from nccl_workbook.rank import _pending_collective

KEPT = Path(__file__).resolve().parents[1] / "data" / "logs" / "nccl_gpu"


@pytest.fixture
def one_rank() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=2))
    try:
        yield
    finally:
        dist.destroy_process_group()
        timeouts._SIDE_BARRIERS.clear()


def test_a_gloo_groups_collectives_take_cpu_tensors(one_rank: None) -> None:
    assert collective_device() == torch.device("cpu")


def test_barrier_with_timeout_on_a_torch_without_it(one_rank: None, monkeypatch: pytest.MonkeyPatch) -> None:
    real = dist.barrier

    def barrier_of_torch_2_11(group=None, async_op=False, device_ids=None):  # noqa: ANN001, ANN202
        return real(group=group, async_op=async_op, device_ids=device_ids)

    monkeypatch.setattr(dist, "barrier", barrier_of_torch_2_11)
    assert "timeout" not in inspect.signature(dist.barrier).parameters
    assert timeouts.wait_with_timeout(lambda: 5, timeout_s=9) == 5
    assert timeouts.wait_with_timeout(lambda: 6, timeout_s=9) == 6  # the same side group, reused
    (side,) = timeouts._SIDE_BARRIERS.values()
    assert timeouts.group_timeout_s(side) == 9 and timeouts.group_timeout_s() == 2  # the main group keeps its own
    timeouts.barrier_with_timeout(20)
    assert sorted(timeouts.group_timeout_s(g) for g in timeouts._SIDE_BARRIERS.values()) == [9, 20]


def test_the_sweep_uses_the_older_names_where_torch_has_no_single(one_rank: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(dist, "all_gather_single", raising=False)
    monkeypatch.delattr(dist, "reduce_scatter_single", raising=False)
    out, inp = torch.empty(4), torch.ones(4)
    health._all_gather_single(out, inp)
    assert out.tolist() == [1.0] * 4
    health._reduce_scatter_single(out, torch.full((4,), 3.0))
    assert out.tolist() == [3.0] * 4


def test_the_timed_out_collective_is_named_from_a_real_nccl_dump() -> None:
    dump = (KEPT / "aeh3" / "nccl_trace_rank_0").read_bytes()
    assert _pending_collective(dump, 0) == ("ALLREDUCE", 6)
    assert _pending_collective(dump, 2**62) is None  # nothing of a later run
    ondemand = (KEPT / "ondemand" / "nccl_trace_rank_0").read_bytes()  # five collectives, all finished
    assert _pending_collective(ondemand, 0) is None
    assert _pending_collective(None, 0) is None and _pending_collective(b"not a dump", 0) is None


def test_an_aborted_collective_retired_as_completed_is_still_named() -> None:
    import pickle

    d = pickle.loads((KEPT / "aeh3" / "nccl_trace_rank_0").read_bytes())
    last = d["entries"][-1]
    last["state"], last["time_discovered_completed_ns"] = "completed", last["time_created_ns"] + 3 * 10**9
    assert _pending_collective(pickle.dumps(d), 0) == ("ALLREDUCE", 6)
    last["time_discovered_completed_ns"] = last["time_created_ns"] + 10**9  # within its 2 s: not this one
    assert _pending_collective(pickle.dumps(d), 0) is None
