"""Message formats taken from torch 2.13's own source (headers and strings in the venv) where no
public log excerpt was found, plus a check that every anchor pattern is reachable."""

from __future__ import annotations

import pytest

from nccl_workbook.triage import Backend, EventKind, parse_log, triage_log
from nccl_workbook.triage.parser import _ANCHOR_RE, _ANCHORS, _may_match

K = EventKind

# c10d/TraceUtils.h retrieveDesyncReport(): printed under TORCH_NCCL_DESYNC_DEBUG=1
DESYNC = """[rank0]:[E1121 10:10:01.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600017 milliseconds before timing out.
[rank0]:[E1121 10:10:01.2 ProcessGroupNCCL.cpp:1220] [PG ID 0 PG GUID 0(default_pg) Rank 0] Desync debugging report:
\t - [0] Timeout at collective: ALLREDUCE, #5
\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:
\t   - [1] joined but didn't finish collective #5 (count from 1)
\t     [2, 3] finished collective #4, but didn't join collective #5 (count from 1)
\t - Snapshot of ranks' latest states:
\t   #4 finished ranks:
\t     [2, 3] finished ALLREDUCE
"""


def test_desync_report_names_the_lagging_ranks():
    events = [e for e in parse_log(DESYNC) if e.kind is K.DESYNC_REPORT]
    assert [(e.rank, e.seq_num, e.named_ranks) for e in events] == [(0, 5, ()), (0, 5, (1,)), (0, 5, (2, 3))]
    assert events[0].op_type == "ALLREDUCE"
    report = triage_log(DESYNC)
    assert report.summary.named_late == (1, 2, 3)
    assert report.top.title == "torch named the late ranks" and report.top.culprit_ranks == (1, 2, 3)


def test_desync_report_missing_ranks_wording():
    log = ("[rank3]:[E1121 10:10:01.2 ProcessGroupNCCL.cpp:1220] [PG 0 Rank 3] report:\n"
           "\t - [3] Timeout at collective: BARRIER, #12\n"
           "\t - To our best knowledge, ranks [0] are the lagging ranks that caused this timeout. "
           "They never joined any collectives\n")
    events = parse_log(log)
    assert [(e.rank, e.op_type, e.seq_num, e.named_ranks) for e in events] == [(3, "BARRIER", 12, ()), (3, None, None, (0,))]


@pytest.mark.parametrize(
    ("line", "named", "timeout_ms"),
    [
        ("[rank0]:[E1122 05:10:18.0 ProcessGroupGloo.cpp:2901] [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms",
         (1,), 2000),
        ("RuntimeError: [Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 30000 ms", (1, 3), 30000),
        ("[Rank 0]: Rank 2 timed out in monitoredBarrier after 2000 ms", (2,), 2000),
    ],
)
def test_monitored_barrier_wordings(line, named, timeout_ms):
    (e,) = parse_log(line)
    assert (e.kind, e.rank, e.named_ranks, e.timeout_ms, e.op_type) == (K.MONITORED_BARRIER, 0, named, timeout_ms, "BARRIER")


def test_nccl_mismatched_collective_warn():
    body = open(__file__.replace("test_triage_parser_formats.py", "../data/logs/real/nccl_296_mismatched_collective_warn.log"),
                "rb").read().partition(b"\n")[2]
    (e,) = parse_log(body)
    assert (e.kind, e.backend, e.named_ranks) == (K.COLLECTIVE_MISMATCH, Backend.NCCL, (39,))


@pytest.mark.parametrize(
    ("line", "kind", "backend", "detail"),
    [
        ("RuntimeError: Application timeout caused pair closure", K.PEER_CLOSED, Backend.GLOO, "pair closure"),
        ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", K.STORE_TIMEOUT, Backend.STORE, "rendezvous"),
        ("torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//cuda//0",
         K.STORE_TIMEOUT, Backend.STORE, "store wait timeout"),
        ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed.",
         K.PEER_CLOSED, Backend.STORE, "got 0 bytes"),
        ("RuntimeError: DataLoader worker (pid(s) 1234, 5678) exited unexpectedly", K.DATALOADER_WORKER_DIED,
         Backend.DATALOADER, "worker pid 1234 5678 exited unexpectedly"),
        ("RuntimeError: received 0 items of ancdata", K.TOO_MANY_OPEN_FILES, Backend.DATALOADER, "ancdata"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", K.CUDA_ERROR, Backend.CUDA,
         "CUDA out of memory"),
        ("[rank2]: RuntimeError: CUDA error: device-side assert triggered", K.CUDA_ERROR, Backend.CUDA,
         "device-side assert triggered"),
        ("Finished writing Flight Recorder debug info to /shared/nccl_trace_rank_3", K.FLIGHT_RECORDER, Backend.NCCL,
         "/shared/nccl_trace_rank_3"),
    ],
)
def test_single_line_formats(line, kind, backend, detail):
    (e,) = parse_log(line)
    assert (e.kind, e.backend) == (kind, backend) and detail in e.detail


def test_mp_spawn_process_number_is_the_rank_of_the_traceback():
    log = ("-- Process 2 terminated with the following error:\n"
           "Traceback (most recent call last):\n"
           '  File "train.py", line 10, in worker\n'
           "ValueError: shard 17 is empty\n")
    exit_, exc = parse_log(log)
    assert (exit_.kind, exit_.rank) == (K.PROCESS_EXIT, 2)
    assert (exc.kind, exc.rank, exc.detail) == (K.PYTHON_EXCEPTION, 2, "ValueError: shard 17 is empty")


def test_torchrun_tee_prefix_gives_the_local_rank():
    (e,) = parse_log("[default1]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                     "Timed out waiting 1800000ms for recv operation to complete")
    assert (e.kind, e.local_rank, e.rank) == (K.COLLECTIVE_TIMEOUT, 1, 1)


def test_source_code_quoting_a_message_is_not_an_event():
    assert parse_log("    raise RuntimeError('DataLoader timed out after {} seconds'.format(self._timeout))") == []


SAMPLES = {
    "watchdog_timeout": "Watchdog caught collective operation timeout",
    "blocking_wait": "Work WorkNCCL(SeqNum=1) timed out in blocking wait",
    "async_exception": "Collective WorkNCCL(SeqNum=1) raised the following async exception: x",
    "status_new": "failure detected by watchdog at work sequence id: 3",
    "status_mid": "Exception (either an error or timeout) detected by watchdog at work: 3",
    "status_old": "Timeout at NCCL work: 3, last enqueued NCCL work: 3",
    "dump_signal": "Received a dump signal due to a collective timeout from rank 1",
    "timeout_signal": "Received a timeout signal from this local rank",
    "fr_prepare": "ProcessGroupNCCL preparing to dump debug info.",
    "fr_stack": "Stack trace of the failed collective: ",
    "fr_written": "Finished writing Flight Recorder debug info to x",
    "watchdog_stuck": "ProcessGroupNCCL's watchdog got stuck for 480 seconds",
    "desync_timeout": "[0] Timeout at collective: ALLREDUCE, #5",
    "desync_missing": "ranks [1] are the lagging ranks that caused this timeout",
    "desync_joined": "[1] joined but didn't finish collective #5",
    "desync_finished": "[2] finished collective #4, but didn't join collective #5",
    "heartbeat": "Heartbeat monitor timed out! Process will be terminated",
    "mismatch": "Detected mismatch between collectives on ranks.",
    "nccl_mismatch": "NCCL WARN Mismatched collective detected, please check rank 3",
    "monitored": "Rank 1 failed to pass monitoredBarrier in 2000 ms",
    "monitored_timeout": "Rank 1 timed out in monitoredBarrier after 2000 ms",
    "gloo_timeout": "Timed out waiting 2000ms for recv operation to complete",
    "peer_closed": "Connection closed by peer [127.0.0.1]:1",
    "pair_closure": "Application timeout caused pair closure",
    "store_clients": "Timed out after 601 seconds waiting for clients. 1/2 clients joined.",
    "socket_timeout": "RuntimeError: Socket Timeout",
    "client_socket": "The client socket has timed out after 600s while trying to connect to (h, 1).",
    "store_wait": "wait timeout after 1800000ms, keys: x",
    "store_key": "Timeout waiting for key: x",
    "rdzv_timeout": "RendezvousTimeoutError",
    "recv_zero": "Failed to recv, got 0 bytes",
    "dl_timeout": "DataLoader timed out after 5 seconds",
    "dl_worker": "DataLoader worker (pid 12) is killed by signal: Killed.",
    "too_many_files": "Too many open files",
    "ancdata": "received 0 items of ancdata",
    "nccl_error": "NCCL error in: x.cpp:1, unhandled system error, NCCL version 2",
    "nccl_code": "ncclRemoteError: A call failed",
    "nccl_warn": "h:1:2 [0] NCCL WARN Net : Call to recv failed",
    "duplicate_gpu": "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
    "cuda_error": "CUDA error: an illegal memory access was encountered",
    "cuda_oom": "CUDA out of memory. Tried to allocate",
    "cuda_failure": "Cuda failure 1 'invalid argument'",
    "unused": "Expected to have finished reduction in the prior iteration before starting a new one.",
    "elastic_rank": "  rank      : 1 (local_rank: 1)",
    "elastic_exit": "  exitcode  : 1 (pid: 3957)",
    "elastic_failed": "failed (exitcode: 1) local_rank: 0 (pid: 3956) of binary: python",
    "root_cause": "Root Cause (first observed failure):",
    "spawn_process": "-- Process 3 terminated with the following error:",
}


def test_every_anchor_has_a_sample_that_passes_the_prefilter():
    assert set(SAMPLES) == {name for name, _ in _ANCHORS}
    for name, sample in SAMPLES.items():
        assert _may_match(sample), f"prefilter keywords miss anchor {name!r}"
        found = [m.lastgroup for m in _ANCHOR_RE.finditer(sample)]
        assert name in found, (name, found)
