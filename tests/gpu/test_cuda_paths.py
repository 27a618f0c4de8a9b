"""The workbook's CUDA paths on one GPU: ``backend="auto"``, a forked engine's CUDA, the health check and
the sweep's CUDA-event timing, the tracer on CUDA tensors, a real NCCL watchdog timeout through a
run (the engine survives it), and every fix of ``nccl_workbook.fixes`` in a 1-rank NCCL group."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nccl_workbook import health
from nccl_workbook.cluster import RankCluster
from nccl_workbook.flight.dumps import parse_dump
from nccl_workbook.runner import result_from_run
from nccl_workbook.status import RankStatus
from nccl_workbook.trace import trace_frame
from tests.gpu import programs


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[RankCluster]:
    with RankCluster(n_ranks=1, backend="auto") as c:
        yield c


def test_auto_picks_nccl_when_every_rank_has_a_gpu(gpu_cluster: RankCluster) -> None:
    assert gpu_cluster.engines[0].cuda_devices >= 1
    assert gpu_cluster.backend == "nccl"


def test_auto_stays_on_gloo_when_ranks_outnumber_gpus() -> None:
    import torch

    n = torch.cuda.device_count() + 1  # NCCL refuses two ranks on one GPU
    with RankCluster(n_ranks=n, backend="auto") as c:
        assert c.backend == "gloo"
        assert health.check(c).ok


def test_a_forked_engine_initialises_cuda(gpu_cluster: RankCluster) -> None:
    assert gpu_cluster.fork_engines and gpu_cluster._zygote is not None, "engines were not forked"
    run = gpu_cluster.run(programs.cuda_facts, None, pg_timeout_s=30, world_size=1, deadline_s=60)
    rep = run.reports[0]
    assert rep.status is RankStatus.OK, rep.error
    m = rep.metrics
    assert m["ppid"] == gpu_cluster._zygote.pid  # forked from the server that imported torch
    assert m["initialized"] and m["matmul_ok"] and m["device"] == "cuda:0" and m["backend"] == "nccl"
    print(m)
    # the fork server never created a CUDA context (what makes the fork safe): an engine with one maps
    # the driver's device files, the server does not. (Importing torch does load libcuda.so into the
    # server, measured on torch 2.11: loading the library is not initialising CUDA.)
    with open(f"/proc/{gpu_cluster._zygote.pid}/maps") as f:
        assert m["maps_device_files"] and "/dev/nvidia" not in f.read()


def test_health_check_on_nccl(gpu_cluster: RankCluster) -> None:
    r = health.check(gpu_cluster)
    assert r.ok, r.summary()
    x = r.ranks[0]
    assert x.backend == "nccl" and x.device == "cuda:0" and x.allreduce_ok
    assert x.nccl and x.nccl[0].isdigit() and x.cuda


def test_sweep_times_with_cuda_events(gpu_cluster: RankCluster) -> None:
    res = health.sweep(gpu_cluster, sizes=(4, 2**20, 2**26))
    f = res.frame
    assert res.backend == "nccl" and (f["time_us"] > 0).all()
    assert res.host_copy_gbps > 100  # a device-to-device copy: hundreds of GB/s, where a host copy is ~10
    ar = f[f["op"] == "all_reduce"].set_index("size_bytes")
    assert ar.loc[2**26, "algbw_gbps"] > 10 * ar.loc[4, "algbw_gbps"]


def test_tracer_on_cuda_tensors(gpu_cluster: RankCluster) -> None:
    run = gpu_cluster.run(programs.traced_steps, 3, pg_timeout_s=30, world_size=1, deadline_s=60)
    rep = run.reports[0]
    assert rep.status is RankStatus.OK, rep.error
    df = trace_frame(list(rep.rows))
    coll = df[df["kind"] == "collective"]
    assert set(coll["name"]) == {"ALLREDUCE", "BARRIER"}
    assert (coll["status"] == "ok").all() and (coll["t_end_ns"] >= coll["t_start_ns"]).all()
    assert {"float32", "bfloat16"} <= set(coll["dtype"].dropna())
    assert 2 * 2**20 in set(coll["nbytes"].dropna())
    assert len(df[df["kind"] == "step"]) == 3 and rep.steps == 3


def test_a_real_watchdog_timeout_through_the_workbook(gpu_cluster: RankCluster) -> None:
    pid = gpu_cluster.engines[0].pid
    run = gpu_cluster.run(programs.stalled_allreduce, 8.0, pg_timeout_s=2.0, world_size=1, deadline_s=90)
    rep = run.reports[0]
    print("error:", rep.error, "metrics:", rep.metrics)
    assert rep.status is RankStatus.TIMEOUT, (rep.status, rep.error)
    assert "ALLREDUCE" in rep.error
    df = trace_frame(list(rep.rows))
    coll = df[df["kind"] == "collective"].sort_values("t_enqueue_ns")
    assert coll["name"].iloc[-1] == "ALLREDUCE" and coll["status"].iloc[-1] == "timeout", coll
    assert (coll["status"].iloc[:-1] == "ok").all() and "ALLREDUCE" in set(coll["name"].iloc[:-1])
    result = result_from_run(run, scenario="gpu-stall", variant="broken")
    assert result.failed_op == "ALLREDUCE"
    # the engine's NCCL flight recorder came back with both all-reduces of the run
    assert rep.fr_dump, "no flight-recorder dump came back from the NCCL rank"
    dump = parse_dump(rep.fr_dump, 0)
    assert len([e for e in dump.entries if e.profiling_name == "nccl:all_reduce"]) >= 2, dump.entries
    # the engine survived the timeout (TORCH_NCCL_ASYNC_ERROR_HANDLING=2) and runs the next job
    assert gpu_cluster.ensure_healthy() == []
    assert gpu_cluster.engines[0].pid == pid
    after = health.check(gpu_cluster)
    assert after.ok and after.ranks[0].pid == pid


@pytest.mark.parametrize("checks", [None, *[(name,) for name in programs.RISKY]], ids=["safe", *programs.RISKY])
def test_every_fix_on_cuda_tensors(gpu_cluster: RankCluster, checks: tuple[str, ...] | None) -> None:
    run = gpu_cluster.run(programs.every_fix_on_cuda, checks, pg_timeout_s=2.0, world_size=1, deadline_s=120)
    rep = run.reports[0]
    print(rep.metrics)
    assert rep.status is RankStatus.OK, (rep.error, rep.traceback)
    failed = {k: v for k, v in rep.metrics.items() if v is not True}
    assert len(rep.metrics) == (len(checks) if checks else 14) and not failed, failed

