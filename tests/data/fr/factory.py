"""One small factory for synthetic flight-recorder dumps (the dicts torch 2.13 pickles), gloo- and
NCCL-shaped, so that the flight tests need no cluster and no GPU.

The NCCL shape follows torch 2.13's recorder source field by field (``FlightRecorder.hpp``,
``FlightRecorderDetail.hpp``: version ``"2.10"``, ``comm_lib_version``, ``pg_config`` rows
``{name, desc, ranks}`` with ranks written ``"[0, 1, 2, 3]"``, ``pg_status`` per ``pg_id``,
entries with ``state`` ``scheduled``/``started``/``completed`` and the ``time_discovered_*``
fields) and its tests (``test_c10d_nccl.py``: a barrier is ``nccl:all_reduce_barrier`` on one
float, ops inside a coalesced group stay ``scheduled``, a stuck collective has no completion
time). Real NCCL dumps were not available here. The gloo shape is what torch 2.13 wrote in this
workbook's own runs (every entry ``scheduled``, no times, ``pg_config`` one placeholder keyed
``''``, ``retired`` True).

``python -m tests.data.fr.factory`` rewrites the committed fixture folder ``nccl_rank0_late/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

S = 1_000_000_000
T0 = 1_700_000_000 * S  # a wall-clock origin (ns)

FRAMES_BARRIER = [
    {"name": "barrier", "filename": "torch/distributed/distributed_c10d.py", "line": 5349},
    {"name": "wrapper", "filename": "torch/distributed/c10d_logger.py", "line": 83},
    {"name": "train", "filename": "train.py", "line": 118},
]
FRAMES_ALLREDUCE = [
    {"name": "all_reduce", "filename": "torch/distributed/distributed_c10d.py", "line": 3004},
    {"name": "train", "filename": "train.py", "line": 97},
]


def entry(record_id: int, seq: int, op: str = "all_reduce", *, backend: str = "nccl", t_s: float = 0.0,
          state: str | None = None, done_s: float | None = None, started_s: float | None = None,
          sizes: list[list[int]] | None = None, dtype: str = "Float", pg: tuple[str, str] = ("0", "default_pg"),
          pg_id: int = 0, timeout_ms: int = 600_000, p2p_seq: int = 0, is_p2p: bool = False,
          frames: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One entry as torch writes it. NCCL: ``completed`` when ``done_s`` is given, else
    ``scheduled`` (or ``started`` with ``started_s``); gloo: always ``scheduled``, no times."""
    if sizes is None:
        sizes = [] if (backend == "gloo" and op == "barrier") else [[1]] if op == "all_reduce_barrier" else [[3, 4]]
    gloo = backend == "gloo"
    if state is None:
        state = "scheduled" if gloo else "completed" if done_s is not None else "started" if started_s is not None else "scheduled"
    return {
        "frames": frames if frames is not None else (FRAMES_BARRIER if "barrier" in op else FRAMES_ALLREDUCE),
        "record_id": record_id,
        "pg_id": pg_id,
        "process_group": pg,
        "thread_name": "pt_main_thread",
        "thread_id": "140000000000000",
        "collective_seq_id": 0 if is_p2p else seq,
        "p2p_seq_id": p2p_seq,
        "op_id": record_id + 1,
        "profiling_name": f"{backend}:{op}",
        "time_created_ns": T0 + int(t_s * S),
        "input_sizes": sizes,
        "input_dtypes": [dtype] * len(sizes),
        "output_sizes": sizes,
        "output_dtypes": [dtype] * len(sizes),
        "state": state,
        "time_discovered_started_ns": None if gloo or started_s is None else T0 + int(started_s * S),
        "time_discovered_completed_ns": None if gloo or done_s is None else T0 + int(done_s * S),
        "retired": True if gloo else state == "completed",
        "timeout_ms": timeout_ms,
        "is_p2p": is_p2p,
    }


def dump(entries: list[dict[str, Any]], *, backend: str = "nccl", world_size: int = 4,
         pg_config: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """A whole dump around ``entries``: NCCL writes the real process groups and its version,
    gloo a placeholder ``pg_config`` keyed ``''`` and an empty version."""
    if pg_config is None:
        if backend == "gloo":
            pg_config = {"": {"name": "", "desc": "", "ranks": "[]"}}
        else:
            pg_config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[" + ", ".join(map(str, range(world_size))) + "]"}}
    status: dict[str, dict[str, int]] = {}
    for e in entries:
        if e["is_p2p"]:
            continue
        st = status.setdefault(str(e["pg_id"]), {"last_enqueued_collective": -1, "last_started_collective": -1,
                                                 "last_completed_collective": -1})
        st["last_enqueued_collective"] = max(st["last_enqueued_collective"], e["collective_seq_id"])
        if backend == "gloo" or e["state"] == "completed":  # gloo counts every collective it ran
            st["last_completed_collective"] = max(st["last_completed_collective"], e["collective_seq_id"])
    return {
        "version": "2.10",
        "pg_config": pg_config,
        "comm_lib_version": "" if backend == "gloo" else "2.27.5",
        "pg_status": status,
        "entries": entries,
    }


def rank0_late_job(backend: str = "nccl", *, world_size: int = 4, late_rank: int = 0, steps: int = 3,
                   late_s: float | None = None, timeout_ms: int = 600_000, pg_id: int = 0) -> dict[int, dict[str, Any]]:
    """The rank-0-generates-samples incident: a DDP parameter broadcast, ``steps`` gradient
    all-reduces, then a barrier that every rank but ``late_rank`` reaches at t = 1 s.

    ``late_s=None``: the late rank never reaches the barrier before the dump (NCCL's coordinated
    dump at the timeout). ``late_s=x``: it calls the barrier x s after the others (what a gloo
    rank's own post-failure dump holds). NCCL entries before the barrier are completed, the
    barrier is scheduled; gloo entries are all scheduled with no times."""
    barrier = "barrier" if backend == "gloo" else "all_reduce_barrier"
    out: dict[int, dict[str, Any]] = {}
    for r in range(world_size):
        es = [entry(0, 1, "broadcast", backend=backend, t_s=0.05 + 0.001 * r, done_s=0.06 + 0.001 * r,
                    sizes=[[33088]], timeout_ms=timeout_ms, pg_id=pg_id)]
        for i in range(steps):
            t = 0.1 + 0.1 * i + 0.001 * r
            es.append(entry(len(es), 2 + i, "all_reduce", backend=backend, t_s=t, done_s=t + 0.01 + 0.001 * (3 - r),
                            sizes=[[33088]], timeout_ms=timeout_ms, pg_id=pg_id))
        if r != late_rank:
            es.append(entry(len(es), 2 + steps, barrier, backend=backend, t_s=1.0 + 0.001 * r, timeout_ms=timeout_ms, pg_id=pg_id))
        elif late_s is not None:
            es.append(entry(len(es), 2 + steps, barrier, backend=backend, t_s=1.0 + late_s, timeout_ms=timeout_ms, pg_id=pg_id))
        out[r] = dump(es, backend=backend, world_size=world_size)
    return out


def mismatch_job(backend: str = "nccl", *, world_size: int = 4, odd_rank: int = 2) -> dict[int, dict[str, Any]]:
    """Desync: at seq 3 every rank calls all_reduce except ``odd_rank``, which calls all_gather;
    every rank is then stuck in it (NCCL: scheduled)."""
    out: dict[int, dict[str, Any]] = {}
    for r in range(world_size):
        es = [entry(0, 1, "all_reduce", backend=backend, t_s=0.1, done_s=0.11),
              entry(1, 2, "all_reduce", backend=backend, t_s=0.2, done_s=0.21)]
        if r == odd_rank:
            es.append(entry(2, 3, "all_gather", backend=backend, t_s=0.3, sizes=[[3, 4]]))
        else:
            es.append(entry(2, 3, "all_reduce", backend=backend, t_s=0.3))
        out[r] = dump(es, backend=backend, world_size=world_size)
    return out


def healthy_job(backend: str = "nccl", *, world_size: int = 4, steps: int = 3) -> dict[int, dict[str, Any]]:
    """Every rank completed every collective (a dump taken on demand, nothing wrong)."""
    out: dict[int, dict[str, Any]] = {}
    for r in range(world_size):
        es = [entry(i, i + 1, "all_reduce", backend=backend, t_s=0.1 * (i + 1) + 0.001 * r, done_s=0.1 * (i + 1) + 0.02)
              for i in range(steps)]
        out[r] = dump(es, backend=backend, world_size=world_size)
    return out


def coalesced_job(world_size: int = 2) -> dict[int, dict[str, Any]]:
    """NCCL ``_coalescing_manager``: two all_reduces in one group (members stay ``scheduled``; the
    closing ``nccl:coalesced`` entry carries the state), then a plain all_reduce."""
    out: dict[int, dict[str, Any]] = {}
    for r in range(world_size):
        es = [entry(0, 1, "all_reduce", t_s=0.1, sizes=[[2, 3]]),
              entry(1, 1, "all_reduce", t_s=0.1, sizes=[[5, 5]]),
              entry(2, 1, "coalesced", t_s=0.1, done_s=0.12, sizes=[]),
              entry(3, 2, "all_reduce", t_s=0.2, done_s=0.21)]
        out[r] = dump(es, world_size=world_size)
    return out


FIXTURE = Path(__file__).resolve().parent / "nccl_rank0_late"


def write_fixture(folder: Path = FIXTURE) -> list[Path]:
    """The committed NCCL fixture: :func:`rank0_late_job` as NCCL's dump-on-timeout would leave it."""
    import pickle

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, d in rank0_late_job("nccl").items():
        p = folder / f"comm_lib_trace_rank_{r}"
        p.write_bytes(pickle.dumps(d, protocol=2))
        paths.append(p)
    return paths


if __name__ == "__main__":  # pragma: no cover
    for p in write_fixture():
        print(p.name)
