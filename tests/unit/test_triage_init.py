"""Failures before training starts: rendezvous, the store, connection set-up (issue 17, part 1).

Two sources: logs recorded with this machine's torch 2.13 (``tests/data/logs/torch213``, made by its
``make_logs.py``), and, for the NCCL-only messages the CPU build cannot print, lines in the exact
format of torch's ``ProcessGroupNCCL.cpp`` / gloo / ``distributed_c10d.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_workbook.triage import Backend, EventKind, parse_log, triage_log

K = EventKind
DATA = Path(__file__).resolve().parents[1] / "data" / "logs" / "torch213"


def body(name: str) -> bytes:
    return (DATA / name).read_bytes().partition(b"\n")[2]


# --- recorded with torch 2.13 ---------------------------------------------------------------------


def test_rank_late_to_init_is_named_from_gloo_s_address_key():
    events = parse_log(body("gloo_rank1_late_to_init.log"))
    (wait,) = [e for e in events if e.kind is K.STORE_TIMEOUT]
    assert (wait.backend, wait.timeout_ms, wait.store_key, wait.named_ranks) == (
        Backend.STORE, 2000, "/default_pg/0//cpu//0/1", (1,))
    top = triage_log(body("gloo_rank1_late_to_init.log")).top
    assert top.title == "A rank reached init_process_group too late" and top.culprit_ranks == (1,)


def test_store_client_connect_timeout_has_the_address():
    events = parse_log(body("store_client_connect_timeout.log"))
    assert events and all(e.kind is K.STORE_TIMEOUT and e.timeout_ms == 2000 for e in events)
    assert {e.address for e in events} == {events[0].address} and events[0].address.startswith("127.0.0.1:")
    top = triage_log(body("store_client_connect_timeout.log")).top
    assert top.title == "The store could not be reached" and events[0].address in top.reason


def test_store_based_barrier_counts_who_arrived():
    events = parse_log(body("store_based_barrier_timeout.log"))
    waiting = [e for e in events if e.kind is K.STORE_WAITING]
    timed_out = [e for e in events if e.kind is K.STORE_TIMEOUT and e.arrived is not None]
    assert [(e.rank, e.world_size, e.arrived, e.store_key, e.timeout_ms) for e in waiting + timed_out] == [
        (0, 2, 1, "store_based_barrier_key:0", 2000)] * 2
    report = triage_log(body("store_based_barrier_timeout.log"))
    assert report.summary.world_size == 2 and report.summary.ranks_missing == (1,)
    assert report.top.title == "Ranks never arrived at init's store based barrier" and report.top.culprit_ranks == (1,)
    assert "1 of 2 ranks arrived" in report.top.reason


def test_dataloader_worker_bus_error_points_at_shared_memory():
    events = parse_log(body("dataloader_worker_bus_error.log"))
    assert [e.kind for e in events] == [K.DATALOADER_WORKER_DIED] * 3
    assert "shared memory" in events[0].detail and "Bus error" in events[1].detail
    top = triage_log(body("dataloader_worker_bus_error.log")).top
    assert top.scenario == "dataloader-stall" and "/dev/shm" in top.reason


# --- formats from torch's source --------------------------------------------------------------------


def test_store_based_barrier_older_wording():
    log = ("[rank7]: torch.distributed.DistStoreError: Timed out initializing process group in store based barrier "
           "on rank: 7, for key: store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=0:00:30)\n"
           "INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize process group for "
           "rank: 0, key: store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=1 day, 0:00:00)\n")
    timeout, waiting = parse_log(log)
    assert (timeout.kind, timeout.rank, timeout.world_size, timeout.arrived, timeout.store_key, timeout.timeout_ms) == (
        K.STORE_TIMEOUT, 7, 8, 4, "store_based_barrier_key:32", 30000)
    assert (waiting.kind, waiting.rank, waiting.arrived, waiting.timeout_ms) == (K.STORE_WAITING, 0, 4, 86400000)
    assert not waiting.is_failure
    top = triage_log(log).top
    assert "4 of 8 ranks arrived, 4 never did" in top.reason and top.culprit_ranks == ()


@pytest.mark.parametrize(
    ("error", "kind", "timeout_ms"),
    [("Socket Timeout", K.STORE_TIMEOUT, None), ("wait timeout after 300000ms", K.STORE_TIMEOUT, 300000),
     ("Broken pipe", K.PEER_CLOSED, None), ("Connection reset by peer", K.PEER_CLOSED, None)],
)
def test_nccl_unique_id_through_the_store(error, kind, timeout_ms):
    # ProcessGroupNCCL::broadcastUniqueNCCLID
    line = ("[rank3]: torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving "
            "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
            f"{error}. This may indicate a possible application crash on rank 0 or a network set up issue.")
    (e,) = parse_log(line)
    assert (e.kind, e.backend, e.rank, e.store_key, e.named_ranks, e.timeout_ms) == (
        kind, Backend.STORE, 3, "0", (0,), timeout_ms)
    assert error in e.detail
    if kind is K.STORE_TIMEOUT:
        top = triage_log(line).top
        assert top.title == "Rank 0 never published the NCCL unique id" and top.culprit_ranks == (0,)


def test_should_dump_flag_means_the_store_is_gone():
    # ProcessGroupNCCL::HeartbeatMonitor::runLoop, torch 2.4+
    log = ('[rank7]:[W1120 01:13:20.892421310 ProcessGroupNCCL.cpp:1662] [PG ID 0 PG GUID 0(default_pg) Rank 7] '
           'Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), '
           "with error: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown "
           "or crash?\n")
    (e,) = parse_log(log)
    assert (e.kind, e.backend, e.rank) == (K.PEER_CLOSED, Backend.STORE, 7)
    assert "got 0 bytes" in e.detail
    top = triage_log(log).top
    assert top.title == "The store's process went away" and top.culprit_ranks == (0,)


@pytest.mark.parametrize(
    ("due", "kind"),
    [("ProcessGroupNCCL watchdog hang", K.WATCHDOG_STUCK), ("collective timeout or exception", K.FLIGHT_RECORDER)],
)
def test_terminating_after_the_debug_dump(due, kind):
    # HeartbeatMonitor::getNCCLWatchdogTimeoutExitMsg
    line = (f"[rank2]:[F1229 20:37:13.091528310 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
            f"[PG ID 0 PG GUID 0(default_pg) Rank 2] Terminating the process after attempting to dump debug info, "
            f"due to {due}.")
    (e,) = parse_log(line)
    assert (e.kind, e.rank) == (kind, 2) and due in e.detail


@pytest.mark.parametrize(
    ("line", "backend", "address"),
    [
        ("[E ProcessGroupGloo.cpp:138] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/"
         "pair.cc:144] no error", Backend.GLOO, None),
        ("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
         "connect [127.0.1.1]:29511: Connection refused", Backend.GLOO, "127.0.1.1:29511"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:144] connect [10.0.0.2]:40291: "
         "Connection refused", Backend.GLOO, "10.0.0.2:40291"),
        ("torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
         "(node1, 29500).", Backend.STORE, "node1:29500"),
        ("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
         "has failed. See inner exception for details.", Backend.STORE, None),
        ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
         "Unable to find address for: eth0", Backend.GLOO, None),
    ],
)
def test_connection_set_up_failures(line, backend, address):
    (e,) = parse_log(line)
    assert (e.kind, e.backend, e.address) == (K.CONNECT_FAILED, backend, address)
    top = triage_log(line).top
    assert top.title == "Connections could not be set up"
    assert ("GLOO_SOCKET_IFNAME" in top.fix) == (backend is Backend.GLOO)


def test_client_socket_older_wording_without_after():
    (e,) = parse_log("RuntimeError: The client socket has timed out while trying to connect to (10.1.2.3, 29500).")
    assert (e.kind, e.address, e.timeout_ms) == (K.STORE_TIMEOUT, "10.1.2.3:29500", None)


def test_dataloader_worker_segfault():
    (e,) = parse_log("ERROR: Unexpected segmentation fault encountered in worker.")
    assert (e.kind, e.backend) == (K.DATALOADER_WORKER_DIED, Backend.DATALOADER)
