"""The flight-recorder dump format of torch 2.13: typed entries, reading and writing folders of
per-rank dumps, selecting one run's entries, fixing gloo dumps up for torch's analyzer, and
cutting dumps at a moment in time. See :mod:`nccl_workbook.flight` for the whole picture.

A dump is the dict ``torch._C._distributed_c10d._dump_fr_trace()`` pickles (the file a job
writes on a timeout): ``version`` (``"2.10"`` in torch 2.13), ``comm_lib_version`` (NCCL's
version; empty for gloo), ``pg_config`` (pg name -> ``{name, desc, ranks}``), ``pg_status``
(``pg_id`` -> last enqueued/started/completed sequence numbers), ``entries`` (one dict per
recorded op: ``record_id``, ``pg_id``, ``process_group`` = (name, desc), ``collective_seq_id``,
``p2p_seq_id``, ``op_id``, ``profiling_name`` such as ``nccl:all_reduce``, ``input_sizes``,
``input_dtypes``, ``output_sizes``, ``output_dtypes``, ``state``, ``time_created_ns``,
``time_discovered_started_ns``, ``time_discovered_completed_ns``, ``retired``, ``timeout_ms``,
``is_p2p``, ``thread_id``, ``thread_name``, ``frames``, and ``duration_ms`` with timing on), and
``nccl_comm_state`` on NCCLX/RCCL builds only. :class:`FlightDump` keeps that dict untouched
(to write it back) next to a typed view (:class:`FlightEntry`).

Usage::

    dumps = load_dumps("fr_dumps")            # one file per rank: <prefix><rank>
    dumps.summary()                           # per rank: entries, newest op, its state
    fixed = fix_for_torch(dumps); fixed.notes # what the fix-up changed (gloo: pg_config)
    write_dumps(fixed, "fr_fixed")            # torchfrtrace fr_fixed  now works
"""

from __future__ import annotations

import copy
import enum
import html
import io
import json
import math
import os
import pickle
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nccl_workbook.ops import op_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = [
    "FR_FILE_PREFIX",
    "FR_ENV_VARS",
    "EntryState",
    "FlightFrame",
    "FlightEntry",
    "ProcessGroupConfig",
    "ProcessGroupStatus",
    "FlightDump",
    "FlightDumps",
    "FlightDumpError",
    "parse_dump",
    "dumps_from_result",
    "write_dumps",
    "load_dumps",
    "select_run",
    "fix_for_torch",
    "snapshot_at",
    "nccl_op_name",
    "group_members",
    "TRACKS_COMPLETION",
]

#: torch 2.13's default file name of a rank's dump, followed by the global rank
FR_FILE_PREFIX = "comm_lib_trace_rank_"

#: the settings that make a real NCCL job write these dumps (torch 2.13 names; see
#: ``FlightRecorder.hpp`` and ``ProcessGroupNCCL.hpp``); set them before ``init_process_group``
FR_ENV_VARS: dict[str, str] = {
    "TORCH_FR_BUFFER_SIZE": "entries kept per process, default 2000 (older name TORCH_NCCL_TRACE_BUFFER_SIZE; 0 disables)",
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1: write the dump when a collective times out (all ranks, via the store)",
    "TORCH_NCCL_ENABLE_MONITORING": "1: the heartbeat monitor thread that writes the dump must run",
    "TORCH_FR_DUMP_TEMP_FILE": "file prefix, rank appended (older name TORCH_NCCL_DEBUG_INFO_TEMP_FILE)",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": "optional: write to <prefix><rank>.pipe to dump a live job on demand",
    "TORCH_NCCL_ENABLE_TIMING": "optional: 'started' state and durations (extra CUDA events)",
}


class FlightDumpError(ValueError):
    """A dump or a folder of dumps cannot be read; the message names the file and what to do."""


class EntryState(str, enum.Enum):
    """An entry's state as the recorder wrote it (gloo entries always stay ``scheduled``)."""

    SCHEDULED = "scheduled"
    STARTED = "started"
    COMPLETED = "completed"


@dataclass(frozen=True)
class FlightFrame:
    """One Python frame of the stack that called the collective."""

    name: str
    filename: str
    line: int

    def __str__(self) -> str:
        return f"{self.name} at {os.path.basename(self.filename)}:{self.line}"


#: the recorder's ScalarType names -> (torch's spelling, as in the trace's ``dtype`` column; bytes per element)
_DTYPES: dict[str, tuple[str, int]] = {
    "Float": ("float32", 4), "Double": ("float64", 8), "Half": ("float16", 2), "BFloat16": ("bfloat16", 2),
    "Long": ("int64", 8), "Int": ("int32", 4), "Short": ("int16", 2), "Char": ("int8", 1), "Byte": ("uint8", 1),
    "Bool": ("bool", 1), "ComplexHalf": ("complex32", 4), "ComplexFloat": ("complex64", 8),
    "ComplexDouble": ("complex128", 16), "UInt16": ("uint16", 2), "UInt32": ("uint32", 4), "UInt64": ("uint64", 8),
    "Float8_e4m3fn": ("float8_e4m3fn", 1), "Float8_e5m2": ("float8_e5m2", 1),
    "Float8_e4m3fnuz": ("float8_e4m3fnuz", 1), "Float8_e5m2fnuz": ("float8_e5m2fnuz", 1),
}

#: backends whose recorder marks entries completed (gloo's never does)
TRACKS_COMPLETION = {"nccl", "ncclx", "rccl", "rcclx", "xccl", "hccl", "mccl"}


def nccl_op_name(profiling_name: str) -> str:
    """``nccl:all_reduce_barrier`` -> ``BARRIER``: :func:`nccl_workbook.ops.op_name`.

    >>> nccl_op_name("gloo:all_reduce"), nccl_op_name("nccl:_all_gather_base"), nccl_op_name("nccl:recv 1<-0")
    ('ALLREDUCE', '_ALLGATHER_BASE', 'RECV')
    """
    return op_name(profiling_name)


@dataclass(frozen=True)
class FlightEntry:
    """One recorded collective (or p2p op) on one rank, as torch wrote it."""

    record_id: int
    pg_id: int
    pg_name: str
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    op_id: int
    profiling_name: str
    is_p2p: bool
    input_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_sizes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    state: EntryState
    time_created_ns: int
    time_discovered_started_ns: int | None
    time_discovered_completed_ns: int | None
    timeout_ms: int | None
    retired: bool | None
    duration_ms: float | None = None
    thread_name: str | None = None
    frames: tuple[FlightFrame, ...] = field(default=(), repr=False)

    @property
    def backend(self) -> str:
        """``nccl``, ``gloo``, … (the prefix of ``profiling_name``)."""
        return self.profiling_name.split(":", 1)[0] if ":" in self.profiling_name else "unknown"

    @property
    def op(self) -> str:
        """The op in NCCL's spelling (see :func:`nccl_op_name`)."""
        return nccl_op_name(self.profiling_name)

    @property
    def seq(self) -> int:
        """``p2p_seq_id`` for p2p ops, else ``collective_seq_id``."""
        return self.p2p_seq_id if self.is_p2p else self.collective_seq_id

    @property
    def numel(self) -> int | None:
        """Elements in the inputs (None when the op has no input tensor, like gloo's barrier)."""
        if not self.input_sizes:
            return None
        return sum(math.prod(s) for s in self.input_sizes)

    @property
    def dtype(self) -> str | None:
        """The inputs' dtype in torch's spelling (distinct ones comma-separated), None without inputs."""
        if not self.input_dtypes:
            return None
        from nccl_workbook.trace import join_dtypes

        return join_dtypes(_DTYPES[d][0] if d in _DTYPES else d for d in self.input_dtypes)

    @property
    def nbytes(self) -> int | None:
        if not self.input_sizes or len(self.input_dtypes) != len(self.input_sizes):
            return None
        sizes = [_DTYPES[d][1] if d in _DTYPES else None for d in self.input_dtypes]
        if any(s is None for s in sizes):
            return None
        return sum(math.prod(s) * b for s, b in zip(self.input_sizes, sizes))  # type: ignore[misc]


@dataclass(frozen=True)
class ProcessGroupConfig:
    """One ``pg_config`` row: a process group's name, description and global ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class ProcessGroupStatus:
    """One ``pg_status`` row (keyed by ``pg_id``); -1 means none."""

    pg_id: int
    last_enqueued: int
    last_started: int
    last_completed: int


def _parse_ranks(text: object) -> tuple[int, ...]:
    if isinstance(text, (list, tuple)):
        return tuple(int(r) for r in text)
    s = str(text).strip()
    return tuple(int(x) for x in re.findall(r"-?\d+", s))


def _opt_ns(v: object) -> int | None:
    """Times: pickles write None, JSON dumps write 0 for 'not seen'."""
    if v is None:
        return None
    n = int(v)  # type: ignore[call-overload]
    return n if n > 0 else None


def _sizes(v: object) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in s) for s in (v or ()))  # type: ignore[union-attr]


def _entry_from_dict(d: Mapping[str, Any], rank: int, i: int) -> FlightEntry:
    try:
        pg = d["process_group"]
        return FlightEntry(
            record_id=int(d["record_id"]),
            pg_id=int(d["pg_id"]),
            pg_name=str(pg[0]),
            pg_desc=str(pg[1]),
            collective_seq_id=int(d["collective_seq_id"]),
            p2p_seq_id=int(d.get("p2p_seq_id", 0)),
            op_id=int(d.get("op_id", 0)),
            profiling_name=str(d["profiling_name"]),
            is_p2p=bool(d.get("is_p2p", False)),
            input_sizes=_sizes(d.get("input_sizes")),
            input_dtypes=tuple(str(x) for x in d.get("input_dtypes") or ()),
            output_sizes=_sizes(d.get("output_sizes")),
            output_dtypes=tuple(str(x) for x in d.get("output_dtypes") or ()),
            state=EntryState(str(d["state"])),
            time_created_ns=int(d["time_created_ns"]),
            time_discovered_started_ns=_opt_ns(d.get("time_discovered_started_ns")),
            time_discovered_completed_ns=_opt_ns(d.get("time_discovered_completed_ns")),
            timeout_ms=None if d.get("timeout_ms") is None else int(d["timeout_ms"]),
            retired=None if d.get("retired") is None else bool(d["retired"]),
            duration_ms=None if d.get("duration_ms") is None else float(d["duration_ms"]),
            thread_name=None if d.get("thread_name") is None else str(d["thread_name"]),
            frames=tuple(FlightFrame(str(f.get("name", "")), str(f.get("filename", "")), int(f.get("line", 0)))
                         for f in d.get("frames") or ()),
        )
    except KeyError as e:
        raise FlightDumpError(f"rank {rank}: entry {i} lacks the field {e.args[0]!r}; is this a torch flight-recorder dump?") from None
    except (TypeError, ValueError, IndexError) as e:
        raise FlightDumpError(f"rank {rank}: entry {i} is malformed ({e}); is this a torch flight-recorder dump?") from None


@dataclass(frozen=True)
class FlightDump:
    """One rank's dump: typed view plus the dict torch wrote (kept to write it back unchanged)."""

    rank: int
    version: str
    comm_lib_version: str
    entries: tuple[FlightEntry, ...]
    pg_config: tuple[ProcessGroupConfig, ...]
    pg_status: tuple[ProcessGroupStatus, ...]
    #: NCCLX/RCCL builds add per-communicator NCCL state; stock NCCL builds do not
    has_nccl_comm_state: bool = False
    source: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], rank: int, *, source: str | None = None) -> FlightDump:
        """Parse the (unpickled or JSON-decoded) dict torch writes; raises :class:`FlightDumpError`."""
        if not isinstance(d, Mapping) or "version" not in d:
            raise FlightDumpError(f"rank {rank}{_src(source)}: not a flight-recorder dump (no 'version' key)")
        entries = tuple(_entry_from_dict(e, rank, i) for i, e in enumerate(d.get("entries") or ()))
        cfg = d.get("pg_config") or {}
        status = d.get("pg_status") or {}
        try:
            pg_config = tuple(ProcessGroupConfig(str(v.get("name", k)), str(v.get("desc", "")), _parse_ranks(v.get("ranks", "[]")))
                              for k, v in cfg.items())
            pg_status = tuple(
                ProcessGroupStatus(int(k), int(v.get("last_enqueued_collective", -1)), int(v.get("last_started_collective", -1)),
                                   int(v.get("last_completed_collective", -1)))
                for k, v in status.items()
            )
        except (AttributeError, TypeError, ValueError) as e:
            raise FlightDumpError(f"rank {rank}{_src(source)}: malformed pg_config/pg_status ({e})") from None
        return cls(rank, str(d["version"]), str(d.get("comm_lib_version", "")), entries, pg_config, pg_status,
                   bool(d.get("nccl_comm_state")), source, d)

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the dict in torch's format."""
        return copy.deepcopy(dict(self.raw))

    def to_bytes(self) -> bytes:
        """The pickle torch's analyzer reads (``pickle.load`` of a plain dict)."""
        return pickle.dumps(self.to_dict(), protocol=2)

    def with_dict(self, d: Mapping[str, Any]) -> FlightDump:
        return FlightDump.from_dict(d, self.rank, source=self.source)

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(sorted({e.backend for e in self.entries}))

    def __repr__(self) -> str:
        return (f"<FlightDump(rank={self.rank}, version={self.version!r}, backends={list(self.backends)}, "
                f"entries={len(self.entries)}, source={self.source!r})>")


def _src(source: str | None) -> str:
    return f" ({source})" if source else ""


class _PlainUnpickler(pickle.Unpickler):
    """The recorder pickles dicts, lists, tuples, strings and numbers only: refuse anything else,
    so that loading a folder cannot run code."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: ANN401
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a flight-recorder dump holds plain values only")


def parse_dump(data: bytes, rank: int, *, source: str | None = None) -> FlightDump:
    """Bytes of one dump (torch's pickle, or the JSON of ``_dump_fr_trace_json``) -> :class:`FlightDump`."""
    head = data.lstrip()[:1]
    if head == b"{":
        try:
            d = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FlightDumpError(f"rank {rank}{_src(source)}: looks like JSON but does not parse ({e})") from None
        for e in d.get("entries") or ():  # JSON turns the (name, desc) tuple into a list
            if isinstance(e.get("process_group"), list):
                e["process_group"] = tuple(e["process_group"])
        return FlightDump.from_dict(d, rank, source=source)
    try:
        d = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not a dump"
        raise FlightDumpError(
            f"rank {rank}{_src(source)}: not a flight-recorder dump ({type(e).__name__}: {e}); expected the pickle "
            "torch writes to $TORCH_FR_DUMP_TEMP_FILE<rank>, or the JSON of _dump_fr_trace_json()"
        ) from None
    return FlightDump.from_dict(d, rank, source=source)


@dataclass(frozen=True)
class FlightDumps:
    """The dumps of one job (one per rank; a rank whose dump is missing is simply absent)."""

    by_rank: Mapping[int, FlightDump]
    world_size: int
    source: str | None = None
    #: what was done to the dumps as torch wrote them (by :func:`fix_for_torch`, :func:`snapshot_at`)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.by_rank:
            raise FlightDumpError("no dumps: need at least one rank's flight-recorder dump")
        if self.world_size < max(self.by_rank) + 1:
            raise FlightDumpError(f"world size {self.world_size} is smaller than the highest rank {max(self.by_rank)} + 1")

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted(self.by_rank))

    @property
    def missing_dumps(self) -> tuple[int, ...]:
        """Ranks of the world with no dump at all (a crashed process writes none)."""
        return tuple(r for r in range(self.world_size) if r not in self.by_rank)

    @property
    def backend(self) -> str:
        """``gloo``, ``nccl``, ``gloo+nccl`` or ``unknown`` (no entries)."""
        names = sorted({b for d in self.by_rank.values() for b in d.backends})
        return "+".join(names) if names else "unknown"

    def __getitem__(self, rank: int) -> FlightDump:
        return self.by_rank[rank]

    def __repr__(self) -> str:
        n = sum(len(d.entries) for d in self.by_rank.values())
        return (f"<FlightDumps(source={self.source!r}, backend={self.backend!r}, ranks={list(self.ranks)} of "
                f"{self.world_size}, entries={n}, notes={len(self.notes)})>")

    def __len__(self) -> int:
        return len(self.by_rank)

    def map(self, fn: Callable[[FlightDump], FlightDump], *, source: str | None = None,
            notes: Sequence[str] = ()) -> FlightDumps:
        """A copy with ``fn(dump) -> dump`` applied to every rank's dump, ``notes`` appended."""
        return FlightDumps({r: fn(d) for r, d in sorted(self.by_rank.items())}, self.world_size,
                           source or self.source, (*self.notes, *notes))

    def summary(self) -> pd.DataFrame:
        """One row per rank: entries, process groups, and its newest entry (op, pg, seq, state,
        created in s after the first entry of any rank)."""
        import pandas as pd

        t0 = min((e.time_created_ns for d in self.by_rank.values() for e in d.entries), default=0)
        rows = []
        for r, d in sorted(self.by_rank.items()):
            last = d.entries[-1] if d.entries else None
            rows.append({
                "rank": r,
                "entries": len(d.entries),
                "process_groups": ", ".join(sorted({e.pg_name for e in d.entries})),
                "last_op": last.profiling_name if last else "",
                "last_pg": last.pg_name if last else "",
                "last_seq": last.seq if last else pd.NA,
                "last_state": last.state.value if last else "",
                "last_created_s": round((last.time_created_ns - t0) / 1e9, 3) if last else float("nan"),
            })
        return pd.DataFrame(rows).set_index("rank")

    def _repr_html_(self) -> str:
        head = (f"<b>flight-recorder dumps</b>{html.escape(_src(self.source))}: backend {html.escape(self.backend)}, "
                f"{len(self)} of {self.world_size} ranks")
        return f"<div>{head}{self.summary().to_html()}</div>"


# -- from a run, to and from disk -------------------------------------------------------------


def dumps_from_result(result: RunResult, *, whole_buffer: bool = False) -> FlightDumps:
    """The dumps a run brought back (``result.fr_dumps``), limited to that run's entries unless
    ``whole_buffer`` (an engine's buffer also holds earlier runs)."""
    if not result.fr_dumps:
        raise FlightDumpError(
            f"run {result.scenario} [{result.variant}] brought back no flight-recorder dumps: runs that succeed "
            "only do when asked, run_scenario(..., flight_recorder=True)"
        )
    dumps = FlightDumps({r: parse_dump(b, r, source=f"rank {r}") for r, b in sorted(result.fr_dumps.items())},
                        result.world_size, f"{result.scenario} [{result.variant}]")
    if whole_buffer:
        return dumps
    # the run's own start on each engine is exact; the newest-default-group rule is the fallback
    since = {r: t for r, t in getattr(result, "t_begin_ns", {}).items() if r in dumps.by_rank}
    return select_run(dumps, since_ns=since) if len(since) == len(dumps.by_rank) else select_run(dumps)


def write_dumps(source: RunResult | FlightDumps, folder: str | os.PathLike[str], *, prefix: str = FR_FILE_PREFIX,
                whole_buffer: bool = False) -> list[Path]:
    """Write one file per rank, ``<folder>/<prefix><rank>``, in torch's on-disk format (the pickle
    a real job writes on a timeout), so that ``torchfrtrace <folder>`` and :func:`load_dumps` read
    them. From a run, only that run's entries are written unless ``whole_buffer``."""
    if not re.fullmatch(r"[\w\-]*", prefix) or prefix[-1:].isdigit():
        raise ValueError(f"prefix {prefix!r} must be letters, digits, '-' or '_' and not end in a digit "
                         "(the rank is appended; torch's analyzer splits it off the end)")
    dumps = source if isinstance(source, FlightDumps) else dumps_from_result(source, whole_buffer=whole_buffer)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, d in sorted(dumps.by_rank.items()):
        p = out / f"{prefix}{r}"
        p.write_bytes(d.to_bytes())
        paths.append(p)
    return paths


_NAME = re.compile(r"([\w\-\_]*?)(\d+)$")  # torch's loader: <prefix><rank>


def load_dumps(folder: str | os.PathLike[str], *, prefix: str | None = None, world_size: int | None = None) -> FlightDumps:
    """Read a folder of dumps named ``<prefix><rank>`` (torch's convention; the prefix is inferred
    when all files share one, as ``torchfrtrace`` does; subfolders are read too).

    ``world_size`` defaults to the size of the default group in ``pg_config`` (NCCL), else the
    highest rank + 1 (gloo records no membership). Raises :class:`FlightDumpError` with what was
    found and what to pass.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FlightDumpError(f"{str(folder)!r} is not a folder; pass the folder that holds one dump per rank "
                              f"({FR_FILE_PREFIX}0, {FR_FILE_PREFIX}1, …)")
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    if prefix is None:
        prefixes = {m.group(1) for p in files if (m := _NAME.search(p.name))}
        if not prefixes:
            raise FlightDumpError(f"no dump files in {root.name!r}: expected names <prefix><rank> such as {FR_FILE_PREFIX}0")
        if len(prefixes) > 1:
            raise FlightDumpError(f"files in {root.name!r} have several name prefixes {sorted(prefixes)}; pass prefix= (--prefix)")
        prefix = prefixes.pop()
    by_rank: dict[int, FlightDump] = {}
    for p in files:
        if not p.name.startswith(prefix) or not p.name[len(prefix):].isdigit():
            continue
        rank = int(p.name[len(prefix):])
        if rank in by_rank:
            raise FlightDumpError(f"two dumps for rank {rank} ({by_rank[rank].source} and {p.name}); keep one folder per job")
        by_rank[rank] = parse_dump(p.read_bytes(), rank, source=p.name)
    if not by_rank:
        raise FlightDumpError(f"no file in {root.name!r} is named {prefix}<rank>")
    if world_size is None:
        world_size = max(by_rank) + 1
        for d in by_rank.values():
            for c in d.pg_config:
                if c.desc == "default_pg" and c.ranks:
                    world_size = max(world_size, max(c.ranks) + 1)
    return FlightDumps(by_rank, world_size, root.name)


# -- selecting, fixing up, cutting --------------------------------------------------------------


def _keep_entries(d: FlightDump, keep: Iterable[bool]) -> FlightDump:
    raw = d.to_dict()
    raw["entries"] = [e for e, k in zip(raw.get("entries") or [], keep) if k]
    return d.with_dict(raw)


def select_run(dumps: FlightDumps, *, since_ns: int | Mapping[int, int] | None = None) -> FlightDumps:
    """Keep each rank's entries of the newest run: from the newest default process group
    (``desc == 'default_pg'``, highest ``pg_id`` per backend) on, with the groups created after
    it; or, with ``since_ns`` (one time, or rank -> time), the entries created at/after it.
    A buffer with no default-group entry is kept whole."""
    def one(d: FlightDump) -> FlightDump:
        if since_ns is not None:
            t = since_ns if isinstance(since_ns, int) else since_ns.get(d.rank, 0)
            return _keep_entries(d, [e.time_created_ns >= t for e in d.entries])
        newest: dict[str, int] = {}
        for e in d.entries:
            if e.pg_desc == "default_pg":
                newest[e.backend] = max(newest.get(e.backend, -1), e.pg_id)
        if not newest:
            return d
        keep = [e.pg_id >= newest.get(e.backend, -1) for e in d.entries]
        return d if all(keep) else _keep_entries(d, keep)

    return dumps.map(one)


def group_members(dumps: FlightDumps) -> dict[str, tuple[int, ...]]:
    """pg name -> global ranks: from pg_config where it has them (NCCL), the whole world for the
    default group, else the ranks whose dumps use the group."""
    users: dict[str, set[int]] = defaultdict(set)
    default: set[str] = set()
    for r, d in dumps.by_rank.items():
        for e in d.entries:
            users[e.pg_name].add(r)
            if e.pg_desc == "default_pg":
                default.add(e.pg_name)
    out: dict[str, tuple[int, ...]] = {}
    for d in dumps.by_rank.values():
        for c in d.pg_config:
            if c.name and c.ranks:
                out.setdefault(c.name, c.ranks)
    for name, rs in users.items():
        if name not in out:
            out[name] = tuple(range(dumps.world_size)) if name in default else tuple(sorted(rs))
    return out


def fix_for_torch(dumps: FlightDumps) -> FlightDumps:
    """Make dumps acceptable to torch's analyzer; what was changed is in the result's ``notes``.

    - keep the newest run (:func:`select_run`); when that dropped entries, renumber
      ``record_id`` from 0 on every rank (the analyzer aligns ranks by ``record_id``, and engines
      with different histories count differently);
    - rebuild ``pg_config`` from the entries' process groups where it lacks them (gloo writes a
      single placeholder keyed ``''``, on which the analyzer fails with ``KeyError: ('0', rank)``),
      members from :func:`group_members`; valid ``pg_config`` rows (NCCL) are kept.

    Dumps that need neither come back unchanged, with no notes.
    """
    selected = select_run(dumps)
    changes: list[str] = []
    dropped = {r: len(dumps[r].entries) - len(selected[r].entries) for r in dumps.ranks}
    firsts = {d.entries[0].record_id for d in selected.by_rank.values() if d.entries}
    # engines with different histories number their entries differently; the analyzer aligns
    # ranks by record_id, so the run's entries must be numbered alike on every rank
    renumber = any(dropped.values()) or len(firsts) > 1
    if any(dropped.values()):
        changes.append("kept the newest run's entries (dropped " + ", ".join(f"{n} on rank {r}" for r, n in dropped.items() if n)
                       + " of earlier process groups) and renumbered record_id from 0")
    elif renumber:
        changes.append("renumbered record_id from 0 on every rank (the ranks' buffers started at different record ids)")
    members = group_members(selected)
    rebuilt: set[str] = set()

    def one(d: FlightDump) -> FlightDump:
        raw = d.to_dict()
        if renumber:
            for i, e in enumerate(raw.get("entries") or []):
                e["record_id"] = i
        before = raw.get("pg_config") or {}
        cfg = {k: v for k, v in before.items() if k and isinstance(v, Mapping) and _parse_ranks(v.get("ranks", "[]"))}
        for name, desc in sorted({(e.pg_name, e.pg_desc) for e in d.entries}):
            if name not in cfg:
                cfg[name] = {"name": name, "desc": desc, "ranks": "[" + ", ".join(map(str, members[name])) + "]"}
                rebuilt.add(name)
        if cfg != before:
            raw["pg_config"] = cfg
        return d.with_dict(raw) if (renumber or cfg != before) else d

    fixed = {r: one(d) for r, d in sorted(selected.by_rank.items())}
    if rebuilt:
        changes.append("rebuilt pg_config from the entries' process groups (" + ", ".join(
            f"{n!r}: ranks {list(members[n])}" for n in sorted(rebuilt)) + "); gloo writes one placeholder keyed ''")
    if not changes:
        return dumps
    return FlightDumps(fixed, dumps.world_size, f"{dumps.source or 'dumps'}, fixed up for torch", (*dumps.notes, *changes))


def snapshot_at(dumps: FlightDumps, t_ns: int) -> FlightDumps:
    """The dumps as they were at wall-clock time ``t_ns``: entries created later are dropped,
    completions seen later are undone, ``pg_status`` is rewound to the entries kept."""
    def one(d: FlightDump) -> FlightDump:
        raw = d.to_dict()
        kept = []
        for e in raw.get("entries") or []:
            if int(e["time_created_ns"]) > t_ns:
                continue
            done, started = _opt_ns(e.get("time_discovered_completed_ns")), _opt_ns(e.get("time_discovered_started_ns"))
            if done is not None and done > t_ns:
                e["time_discovered_completed_ns"] = None
                e["state"] = EntryState.STARTED.value if started is not None and started <= t_ns else EntryState.SCHEDULED.value
                e.pop("duration_ms", None)
            if started is not None and started > t_ns:
                e["time_discovered_started_ns"] = None
                e["state"] = EntryState.SCHEDULED.value
            kept.append(e)
        raw["entries"] = kept
        last: dict[str, int] = {}
        for e in kept:
            if not e.get("is_p2p"):
                last[str(e["pg_id"])] = max(last.get(str(e["pg_id"]), 0), int(e["collective_seq_id"]))
        for pg_id, st in (raw.get("pg_status") or {}).items():
            if pg_id in last:
                st["last_enqueued_collective"] = last[pg_id]
                st["last_completed_collective"] = min(int(st.get("last_completed_collective", -1)), last[pg_id])
        return d.with_dict(raw)

    return dumps.map(one, source=f"{dumps.source or 'dumps'}, as of {t_ns}",
                     notes=[f"cut at t={t_ns} ns: entries created later dropped, later completions undone"])
