"""Message formats taken from torch 2.13's own source (headers and strings in the venv) where no
public log excerpt was found, plus a check that every anchor pattern is reachable."""

from __future__ import annotations

import pytest

from nccl_workbook.triage import Backend, EventKind, parse_log, triage_log
from nccl_workbook.triage.parser import _ANCHOR_RE, ANCHORS, _may_match

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


def test_every_anchor_example_matches_and_passes_the_prefilter():
    assert len({a.name for a in ANCHORS}) == len(ANCHORS)
    for anchor in ANCHORS:
        assert all(k and not any(c.isspace() for c in k) for k in anchor.keywords), anchor.name
        # a terminal wrap may add whitespace between two words: it must not hide the message
        spaces = [i for i, c in enumerate(anchor.example) if c == " "]
        for joined in [anchor.example] + [anchor.example[:i] + "  " + anchor.example[i:] for i in spaces]:
            assert _may_match(joined), f"prefilter keywords miss anchor {anchor.name!r} in {joined!r}"
            found = [(m.lastgroup, m.group()) for m in _ANCHOR_RE.finditer(joined)]
            assert anchor.name in [name for name, _ in found], (anchor.name, found)
            matched = next(text for name, text in found if name == anchor.name)
            assert any(k in matched for k in anchor.keywords), (anchor.name, matched, anchor.keywords)


def test_anchors_found_one_at_a_time_are_the_alternation_s_matches():
    """_find_anchors runs only the anchors whose keyword is present, each on its own; it must find
    exactly what the alternation of all anchors finds, on every record of every test log."""
    from pathlib import Path

    from nccl_workbook.triage.parser import _find_anchors, iter_records, normalize_text

    logs = Path(__file__).resolve().parents[1] / "data" / "logs"
    n = 0
    for path in sorted(logs.glob("*/*.log")):
        for record in iter_records(normalize_text(path.read_bytes())):
            expected = [(m.lastgroup, m.start(), m.end()) for m in _ANCHOR_RE.finditer(record.text)]
            assert [(a.name, s, e) for a, s, e in _find_anchors(record.text)] == expected, (path.name, record.text)
            n += len(expected)
    assert n > 200
