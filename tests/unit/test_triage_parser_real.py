"""The parser against real log excerpts from public issue threads (tests/data/logs/real).

Each file starts with a ``# source:`` line naming the repository and thread; the tests parse the
rest and check the fields a human reads off the excerpt. Line numbers count from the first line
after the header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_workbook.triage import Backend, Event, EventKind, parse_log

REAL = Path(__file__).resolve().parents[1] / "data" / "logs" / "real"
K = EventKind


def load(name: str) -> bytes:
    raw = (REAL / name).read_bytes()
    header, _, body = raw.partition(b"\n")
    assert header.startswith(b"# source: "), f"{name} has no source header"
    return body


def parsed(name: str) -> list[Event]:
    return parse_log(load(name))


def only(events: list[Event], kind: EventKind) -> list[Event]:
    return [e for e in events if e.kind is kind]


def test_every_real_example_names_its_source_and_parses():
    files = sorted(REAL.glob("*.log"))
    assert len(files) >= 25
    threads = set()
    for path in files:
        header = path.read_text(encoding="utf-8").splitlines()[0]
        assert header.startswith("# source: ") and "github.com/" in header, path.name
        threads.add(header.split()[4])  # the thread URL
        parse_log(load(path.name))
    assert len(threads) >= 10


# --- NCCL watchdog timeouts -------------------------------------------------------------------


def test_watchdog_with_pid_line_prefix_and_mid_wording_status():
    events = parsed("llamafactory_7396_pid_prefix.log")
    timeouts = only(events, K.COLLECTIVE_TIMEOUT)
    assert [(e.rank, e.seq_num, e.op_type) for e in timeouts] == [(0, 1580, "ALLREDUCE"), (4, 1580, "ALLREDUCE")]
    t0 = timeouts[0]
    assert (t0.numel_in, t0.numel_out, t0.timeout_ms, t0.ran_for_ms) == (466119168, 466119168, 600000, 600060)
    assert t0.backend is Backend.NCCL and t0.line_no == 1 and t0.timestamp == "E321 02:07:08.408271257"
    status = only(events, K.PG_STATUS)
    assert [(e.rank, e.pg_id, e.seq_num, e.last_enqueued, e.last_completed) for e in status] == [
        (0, 1, 1580, 1582, 1579),
        (3, 1, 1580, 1582, 1579),
    ]


def test_reduce_scatter_numel_in_and_out_differ():
    t = only(parsed("llamafactory_6269_reduce_scatter.log"), K.COLLECTIVE_TIMEOUT)[0]
    assert (t.op_type, t.numel_in, t.numel_out, t.seq_num) == ("_REDUCE_SCATTER_BASE", 544997376, 68124672, 7753)


def test_pg_id_guid_name_prefix():
    status = only(parsed("basicsr_737_pg_guid.log"), K.PG_STATUS)
    assert {(e.rank, e.pg_id, e.pg_name, e.last_enqueued, e.last_completed) for e in status} == {
        (1, 0, "default_pg", 811, 807),
        (0, 0, "default_pg", 811, 807),
    }


def test_torch_1x_watchdog_without_numel_or_glog_rank_prefix():
    timeouts = only(parsed("ofa_271_old_no_numel.log"), K.COLLECTIVE_TIMEOUT)
    assert [e.rank for e in timeouts] == [1, 3, 2, 6, 7]
    assert {(e.seq_num, e.op_type, e.numel_in, e.timeout_ms) for e in timeouts} == {(469508, "ALLREDUCE", None, 1800000)}
    assert timeouts[0].ran_for_ms == 1802212


def test_message_glued_to_a_progress_bar():
    events = parsed("pytorch_118369_progress_bar.log")
    assert [(e.rank, e.seq_num) for e in events] == [(0, 96120), (0, 96117), (0, 96125), (7, 64088)]
    assert events[0].ran_for_ms == 25624887 and events[0].line_no == 1


def test_progress_bars_with_line_numbers_then_glued_watchdog():
    (t,) = parsed("llamafactory_8261_progress_bars_glued.log")
    assert (t.kind, t.rank, t.seq_num, t.op_type, t.numel_in, t.line_no) == (K.COLLECTIVE_TIMEOUT, 5, 6, "ALLREDUCE", 1, 7)


def test_blocking_wait_timeouts():
    events = parsed("diffusers_12422_blocking_wait.log")
    blocking = [e for e in events if e.detail == "blocking wait"]
    assert [(e.rank, e.seq_num, e.numel_in) for e in blocking] == [(1, 2521, 160672064), (7, 2521, 160672064)]


def test_global_rank_prefix_vs_rank_inside_a_subgroup():
    events = parsed("nccl_1610_subgroup_rank.log")
    t = only(events, K.COLLECTIVE_TIMEOUT)[0]
    assert (t.rank, t.group_rank, t.op_type, t.numel_in, t.numel_out) == (13, 1, "ALLTOALL_BASE", 1379328, 1572864)
    status = only(events, K.PG_STATUS)
    assert [(e.rank, e.group_rank, e.pg_id) for e in status] == [(13, 1, 11), (15, 0, 11)]


def test_timestamp_and_ray_style_prefixes_are_skipped():
    events = parsed("msswift_7992_time_prefix_named_pg.log")
    assert [(e.kind, e.rank, e.pg_id, e.pg_name) for e in events] == [
        (K.WATCHDOG_STUCK, 4, 12, "EXPERT_MODEL_PARALLEL_GROUP"),
        (K.WATCHDOG_STUCK, 0, 14, "EXPERT_TENSOR_AND_MODEL_PARALLEL_GROUP"),
    ]
    assert events[0].timeout_ms == 480_000


def test_terminal_wrapped_stuck_watchdog_and_pg_prefix_split_across_lines():
    events = parsed("vlmr1_257_wrapped_stuck.log")
    stuck = only(events, K.WATCHDOG_STUCK)[0]
    assert (stuck.rank, stuck.pg_id, stuck.pg_name, stuck.timeout_ms, stuck.line_no) == (6, 0, "default_pg", 480000, 2)


def test_wrapped_inside_a_word_and_between_fields():
    (t,) = only(parsed("openr1_620_wrapped_watchdog_exception.log"), K.COLLECTIVE_TIMEOUT)
    assert (t.rank, t.seq_num, t.op_type, t.numel_in, t.timeout_ms, t.ran_for_ms) == (1, 4, "BROADCAST", 112, 1800000, 1800010)
    (t,) = parsed("openr1_620_wrapped_field.log")
    assert (t.rank, t.pg_name, t.numel_out, t.timeout_ms) == (2, "default_pg", 112, 1800000)


def test_wrapped_inside_field_names_optype_and_seqnum():
    events = parsed("openr1_620_wrapped_optype_rank0_missing.log")
    assert [e.rank for e in events] == [1, 2, 3, 6, 5]
    assert {(e.op_type, e.seq_num, e.numel_in, e.numel_out) for e in events} == {("BROADCAST", 4, 112, 112)}
    (t,) = parsed("sglang_3424_wrapped_in_field_name.log")
    assert (t.rank, t.pg_id, t.seq_num, t.op_type, t.numel_in) == (1, 2, 1522789, "_ALLGATHER_BASE", 298960)


def test_wrapped_before_milliseconds():
    (t,) = parsed("pytorch_135352_wrapped_milliseconds.log")
    assert (t.rank, t.ran_for_ms, t.numel_out) == (5, 600083, 262672384)


def test_word_wrapped_2024_wording_with_old_pg_prefix():
    events = parsed("pytorch_122850_old_timeout_signal.log")
    t, status = events
    assert (t.rank, t.seq_num, t.op_type, t.numel_in, t.timeout_ms, t.ran_for_ms) == (0, 2, "ALLREDUCE", 12, 1000, 1099)
    assert (status.kind, status.pg_id, status.seq_num, status.last_enqueued, status.last_completed) == (K.PG_STATUS, 0, 2, 2, 1)


def test_host_stderr_prefix_old_named_pg_prefix_wrapped_status():
    (status,) = parsed("milabench_269_old_pg_name_wrapped.log")
    assert (status.rank, status.pg_id, status.pg_name, status.seq_num) == (3, 0, "default_pg", 2070)
    assert (status.last_enqueued, status.last_completed, status.line_no) == (2082, 2069, 4)


def test_timeout_at_nccl_work_wording():
    events = parsed("llamafactory_6269_timeout_at_work.log")
    assert [(e.rank, e.pg_id, e.seq_num, e.last_enqueued) for e in events] == [(0, 1, 7753, 7755), (2, 1, 7753, 7755), (6, 1, 7753, 7755)]


def test_failure_detected_new_wording_and_uint64_numel_is_unknown():
    status, t = parsed("nccl_1504_coalesced_uint64_numel.log")
    assert (status.seq_num, status.last_enqueued, status.last_completed) == (1, 1, None)  # -1: nothing completed
    assert (t.op_type, t.numel_in, t.numel_out) == ("COALESCED", None, None)  # 18446744073709551615


def test_terminate_what_with_old_pg_prefix():
    (t,) = parsed("sglang_1693_terminate_what.log")
    assert (t.rank, t.pg_id, t.op_type, t.numel_in, t.numel_out) == (5, 3, "_ALLGATHER_BASE", 19008, 152064)


def test_deepspeed_broadcast_and_old_watchdog_terminated():
    events = parsed("pytorch_118369_deepspeed_broadcast.log")
    assert [e.rank for e in events] == [2, 4, 6, 3]
    assert {(e.op_type, e.seq_num) for e in events} == {("BROADCAST", 880)}
    (t,) = parsed("catalyst_15_old_watchdog_terminated.log")
    assert (t.rank, t.seq_num, t.ran_for_ms) == (6, 880, 1800902)


def test_stuck_watchdog_before_an_allgather_timeout():
    stuck, t = parsed("arctictraining_219_stuck_allgather.log")
    assert (stuck.kind, stuck.rank) == (K.WATCHDOG_STUCK, 7)
    assert (t.rank, t.op_type, t.numel_in, t.numel_out) == (2, "_ALLGATHER_BASE", 16384000, 131072000)


def test_issue_title_line_without_prefix():
    (t,) = parsed("megatron_1207_title.log")
    assert (t.rank, t.seq_num, t.op_type, t.numel_in, t.ran_for_ms) == (None, 5, "ALLREDUCE", 1, 600013)


# --- heartbeat, stuck watchdog, flight recorder ------------------------------------------------


def test_heartbeat_monitor_old_pg_prefix():
    events = parsed("llamafactory_6953_heartbeat.log")
    assert [(e.kind, e.rank, e.pg_id) for e in events] == [
        (K.HEARTBEAT, 144, 0), (K.FLIGHT_RECORDER, 144, 0), (K.WATCHDOG_STUCK, 144, 0)
    ]
    assert "1 work items" in events[0].detail and events[2].timeout_ms == 600_000


def test_heartbeat_on_several_ranks():
    heartbeats = only(parsed("deim_105_heartbeat_multi.log"), K.HEARTBEAT)
    assert [e.rank for e in heartbeats] == [1, 0, 2]


def test_heartbeat_in_a_subgroup_keeps_global_rank():
    events = only(parsed("xdit_147_subgroup_heartbeat.log"), K.HEARTBEAT)
    assert [(e.rank, e.group_rank, e.pg_id) for e in events] == [(0, 0, 5), (4, 0, 5)]


def test_dump_signal_from_another_rank():
    fr = parsed("simplegrpo_46_dump_signal_from_rank.log")[0]
    assert (fr.kind, fr.rank, fr.named_ranks, fr.last_enqueued, fr.last_completed) == (K.FLIGHT_RECORDER, 5, (2,), 136, 136)


def test_dump_signal_wrapped_from_this_local_rank():
    signals = [e for e in parsed("torchtune_2651_dump_signal_wrapped.log") if "dump signal" in e.detail]
    assert [(e.rank, e.last_enqueued, e.last_completed, e.named_ranks) for e in signals] == [
        (7, 9387, 9386, ()), (6, 9387, 9386, ())
    ]


def test_scalar_allreduce_with_dump_signal_and_new_status():
    events = parsed("openrlhf_1126_scalar_allreduce_multi_rank.log")
    assert [e.kind for e in events] == [K.FLIGHT_RECORDER, K.FLIGHT_RECORDER, K.COLLECTIVE_TIMEOUT, K.PG_STATUS]
    assert events[0].named_ranks == (6,)
    t, status = events[2:]
    assert (t.rank, t.seq_num, t.numel_in) == (7, 460631, 1)
    assert (status.rank, status.seq_num, status.last_enqueued, status.last_completed) == (7, 460631, 460631, 460630)


# --- mismatches -------------------------------------------------------------------------------


def test_fingerprint_shape_mismatch():
    (m,) = parsed("opendde_23_mismatch_shape.log")
    assert (m.kind, m.rank, m.op_type, m.seq_num, m.named_ranks, m.backend) == (
        K.COLLECTIVE_MISMATCH, 1, "_ALLGATHER_BASE", 0, (2,), Backend.NCCL)
    assert "359, 1, 1435, 16" in m.detail


def test_fingerprint_mismatch_with_rank_prefix_and_diff():
    (m,) = parsed("msswift_9443_mismatch_rank_prefix.log")
    assert (m.rank, m.seq_num, m.op_type, m.named_ranks) == (1, 3104, "ALLREDUCE", (0,))
    assert "195812480" in m.detail


def test_glued_fingerprint_without_comma_and_launcher_summary():
    exit_, m = parsed("pytorch_148976_barrier_mismatch_glued.log")
    assert (exit_.kind, exit_.rank, exit_.local_rank) == (K.PROCESS_EXIT, 1, 1)
    assert "exitcode 1" in exit_.detail
    assert (m.kind, m.rank, m.op_type, m.seq_num, m.named_ranks) == (K.COLLECTIVE_MISMATCH, 1, "BARRIER", 1, (2,))


def test_torch_1_11_inconsistent_collective_wording():
    (m,) = parsed("pytorch_78022_inconsistent_collective.log")
    assert (m.rank, m.op_type) == (0, "BROADCAST") and "34112" in m.detail


def test_mismatch_wrapped_with_padding_spaces():
    (m,) = parsed("pytorch_100214_mismatch_wrapped_spaces.log")
    assert (m.rank, m.op_type, m.named_ranks) == (0, "ALLREDUCE", (1,))
    assert "rank 1 runs REDUCE" in m.detail


# --- gloo -------------------------------------------------------------------------------------


def test_gloo_send_and_recv_glued_then_nccl():
    events = parsed("dfine_75_gloo_glued_and_nccl.log")
    gloo = [e for e in events if e.backend is Backend.GLOO]
    assert [(e.detail, e.timeout_ms, e.line_no) for e in gloo] == [("send", 1800000, 1), ("recv", 1800000, 2), ("recv", 1800000, 4)]
    nccl = only(events, K.COLLECTIVE_TIMEOUT)[-1]
    assert (nccl.rank, nccl.seq_num, nccl.numel_in, nccl.numel_out) == (0, 40402014, 513, 2052)


def test_gloo_op_comes_from_the_traceback():
    (t,) = parsed("detectron2_3243_gloo_send_allgather.log")
    assert (t.kind, t.backend, t.op_type, t.detail) == (K.COLLECTIVE_TIMEOUT, Backend.GLOO, "ALLGATHER", "send")
    (t,) = parsed("pipedream_39_gloo_recv_broadcast.log")
    assert (t.op_type, t.detail, t.timeout_ms) == ("BROADCAST", "recv", 1800000)


def test_gloo_peer_closed_in_barrier_with_ci_timestamps():
    (p,) = parsed("pytorch_61670_gloo_barrier_peer_closed.log")
    assert (p.kind, p.backend, p.op_type) == (K.PEER_CLOSED, Backend.GLOO, "BARRIER")
    assert "172.17.0.2" in p.detail


def test_gloo_peer_closed_broadcast_twice():
    events = parsed("sglang_1127_gloo_broadcast_peer_closed.log")
    assert [(e.kind, e.op_type, e.line_no) for e in events] == [(K.PEER_CLOSED, "BROADCAST", 5), (K.PEER_CLOSED, "BROADCAST", 12)]


def test_gloo_closed_and_reset_by_peer():
    events = parsed("rvc_1882_gloo_read_error.log")
    assert [(e.kind, e.backend) for e in events] == [(K.PEER_CLOSED, Backend.GLOO)] * 2
    assert "reset" in events[1].detail


def test_pair_closure_and_spawn_process_rank():
    closure, exit_ = parsed("bcnet_53_pair_closure.log")
    assert (closure.kind, closure.backend) == (K.PEER_CLOSED, Backend.GLOO)
    assert (exit_.kind, exit_.rank) == (K.PROCESS_EXIT, 3)


def test_store_connection_reset_is_store_not_nccl():
    (p,) = parsed("pytorch_128680_store_reset.log")
    assert (p.kind, p.backend, p.rank) == (K.PEER_CLOSED, Backend.STORE, 1)


# --- store / rendezvous -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "timeout_ms", "world", "detail"),
    [
        ("openrlhf_1040_store_clients.log", 1801000, 3, "1/3 clients joined"),
        ("visualrft_123_store_clients.log", 901000, 3, "1/3 clients joined"),
        ("pytorch_111805_store_workers.log", 6000, 2, "1/2 clients joined"),
    ],
)
def test_store_k_of_n_clients(name, timeout_ms, world, detail):
    (s,) = only(parsed(name), K.STORE_TIMEOUT)
    assert (s.backend, s.timeout_ms, s.world_size, s.detail) == (Backend.STORE, timeout_ms, world, detail)


def test_store_socket_timeouts():
    (s,) = parsed("vllm_19670_client_socket_timeout.log")
    assert (s.kind, s.timeout_ms) == (K.STORE_TIMEOUT, 600000) and "172.17.0.9, 46229" in s.detail
    assert [e.detail for e in parsed("paimegatron_468_socket_timeout.log")] == ["Socket Timeout"]
    assert [e.kind for e in parsed("pytorch_55571_store_wait_socket_timeout.log")] == [K.STORE_TIMEOUT]


# --- data loader and files ------------------------------------------------------------------


def test_dataloader_worker_killed_with_rank_prefix():
    (d,) = parsed("paimegatron_583_dataloader_killed_rank_prefix.log")
    assert (d.kind, d.rank, d.backend) == (K.DATALOADER_WORKER_DIED, 0, Backend.DATALOADER)
    assert d.detail == "worker pid 9382 killed by signal: Killed"


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("pytorch_72034_dataloader_killed_launch.log", "worker pid 29001 killed by signal: Killed"),
        ("mhliao_db_94_dataloader_segfault.log", "worker pid 25902 killed by signal: Segmentation fault"),
        ("mmseg_2085_dataloader_terminated.log", "worker pid 8102 killed by signal: Terminated"),
    ],
)
def test_dataloader_worker_deaths(name, detail):
    (d,) = parsed(name)
    assert (d.kind, d.detail) == (K.DATALOADER_WORKER_DIED, detail)


def test_dataloader_timeout_not_confused_by_the_raise_line():
    (d,) = parsed("pytorch_68643_dataloader_timeout.log")
    assert (d.kind, d.timeout_ms, d.line_no) == (K.DATALOADER_TIMEOUT, 5000, 3)


def test_too_many_open_files_variants():
    (f,) = parsed("neuralrecon_91_too_many_open_files.log")
    assert (f.kind, f.backend) == (K.TOO_MANY_OPEN_FILES, Backend.DATALOADER)
    events = parsed("maskrcnn_158_errno24.log")
    assert [e.kind for e in events] == [K.PYTHON_EXCEPTION, K.TOO_MANY_OPEN_FILES]
    assert [e.kind for e in parsed("gpustack_5258_errno24_timestamped.log")] == [K.TOO_MANY_OPEN_FILES] * 2


# --- NCCL / CUDA errors ----------------------------------------------------------------------


def test_async_system_error_keeps_the_work_fields():
    (e,) = parsed("pytorch_149984_nccl_system_error_async.log")
    assert (e.kind, e.seq_num, e.op_type, e.numel_in, e.timeout_ms) == (K.NCCL_ERROR, 2, "ALLREDUCE", 1, 1000000)
    assert "ncclSystemError" in e.detail and "unhandled system error" in e.detail


def test_unhandled_cuda_error_chain_is_one_cuda_event():
    (e,) = parsed("nccl_1410_unhandled_cuda_error.log")
    assert (e.kind, e.backend, e.rank) == (K.CUDA_ERROR, Backend.NCCL, 7)
    assert "ncclUnhandledCudaError" in e.detail and "invalid argument" in e.detail
    (e,) = parsed("diffusionpipe_10_unhandled_cuda_999.log")
    assert (e.kind, e.rank) == (K.CUDA_ERROR, 0) and "999" in e.detail


def test_torch_1x_nccl_error_line():
    (e,) = parsed("slowfast_462_old_nccl_error.log")
    assert e.kind is K.NCCL_ERROR and "ncclUnhandledCudaError" in e.detail and "unhandled cuda error" in e.detail


@pytest.mark.parametrize(
    "name", ["nccl_2076_remote_error.log", "nccl_934_remote_error_old.log", "deepep_106_glued_wide_line.log"]
)
def test_remote_errors(name):
    (e,) = parsed(name)
    assert e.kind is K.NCCL_ERROR and "ncclRemoteError" in e.detail


def test_nccl_warn_lines_and_remote_peer_close_merge_into_one_error():
    (e,) = parsed("nccl_795_nccl_warn_peer_closed.log")
    assert e.kind is K.NCCL_ERROR and "Connection closed by remote peer" in e.detail


def test_nccl_info_lines_are_not_events():
    assert parsed("nccl_1059_host_prefix.log") == []


def test_nccl_warn_cuda_failure_out_of_memory():
    (e,) = parsed("opensora_386_nccl_warn_oom.log")
    assert (e.kind, e.detail) == (K.CUDA_ERROR, "Cuda failure 'out of memory'")


def test_duplicate_gpu_with_mpirun_prefixes():
    events = parsed("horovod_3929_mpirun_duplicate_gpu.log")
    assert [(e.kind, e.rank, e.named_ranks) for e in events] == [
        (K.DUPLICATE_GPU, 2, (0,)), (K.DUPLICATE_GPU, 4, (0,)), (K.DUPLICATE_GPU, 0, (1,))
    ]


def test_duplicate_gpu_interleaved_stderr():
    events = parsed("megatron_661_duplicate_gpu_interleaved.log")
    assert [(e.kind, e.rank) for e in events] == [(K.DUPLICATE_GPU, 3), (K.DUPLICATE_GPU, 7)]
    assert all("ncclInvalidUsage" in e.detail for e in events)


def test_duplicate_gpu_ray_worker_prefix_and_plain():
    (e,) = parsed("nemorl_3155_ray_worker_prefix.log")
    assert (e.rank, e.named_ranks) == (15, (7,))
    (e,) = parsed("verl_161_duplicate_gpu.log")
    assert (e.kind, e.rank, e.named_ranks) == (K.DUPLICATE_GPU, 1, (0,))


def test_cuda_error_in_the_watchdog_thread():
    (e,) = parsed("lmdeploy_3258_cuda_illegal_memory.log")
    assert (e.kind, e.rank, e.pg_id, e.detail) == (K.CUDA_ERROR, 2, 0, "CUDA error: an illegal memory access was encountered")
    (e,) = parsed("vllm_4108_old_watchdog_cuda.log")
    assert (e.kind, e.rank) == (K.CUDA_ERROR, 0)


def test_other_python_exception_is_kept():
    (e,) = parsed("vllm_17098_pg_guid_cuda.log")
    assert e.kind is K.PYTHON_EXCEPTION and e.detail.startswith("RuntimeError: Triton Error [CUDA]")


def test_hex_pg_guid_and_flight_recorder_stack_names_the_op():
    t, status, stack = parsed("primerl_3186_hex_pg_guid_stack.log")
    assert (t.rank, t.group_rank, t.op_type, t.numel_in) == (13, 1, "ALLTOALL_BASE", 195004416)
    assert (status.pg_id, status.group_rank, status.last_enqueued, status.last_completed) == (3, 1, 1441, 1437)
    assert stack.kind is K.FLIGHT_RECORDER and stack.detail == "stack trace of the failed collective"


def test_reduce_on_many_ranks_wrapped_after_the_colon():
    events = parsed("milabench_269_reduce_many_ranks.log")
    timeouts = only(events, K.COLLECTIVE_TIMEOUT)
    assert [e.rank for e in timeouts] == [14, 12, 11, 15]
    assert {(e.op_type, e.seq_num, e.numel_in) for e in timeouts} == {("REDUCE", 2070, 1)}
    (status,) = only(events, K.PG_STATUS)
    assert (status.rank, status.pg_name, status.last_enqueued, status.last_completed) == (12, "default_pg", 2070, 2069)
