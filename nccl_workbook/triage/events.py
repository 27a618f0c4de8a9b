"""Structured events parsed out of a distributed-training log, and their tidy DataFrame.

One :class:`Event` is one recognised message: a collective timeout, a stuck watchdog, a peer that
closed its connection, a DataLoader worker that died, ... Its field names are a contract shared
with the rest of the workbook (see ``DESIGN.md``): ``backend, kind, rank, seq_num, op_type,
numel_in, numel_out, timeout_ms, ran_for_ms, pg_id, pg_name, last_enqueued, last_completed`` plus
the raw ``line`` and its 1-based ``line_no``. Fields a message does not carry are ``None``, never
``-1``.

``rank`` is the global rank of the process that printed the message when the log says so
(``[rank3]:`` prefixes, mpirun ``[1,3]<stderr>:``); otherwise the rank printed inside the message
(``[Rank 3]``, ``[PG ID 0 ... Rank 3]``), which is the rank *within the process group* named by
``pg_id``/``pg_name``: for the default group the two are the same. ``group_rank`` keeps the
in-message rank separately when both are present.

Usage::

    from nccl_workbook.triage import parse_log, events_frame
    events = parse_log(open("job.log", "rb").read())
    events[0].kind            # EventKind.COLLECTIVE_TIMEOUT
    events_frame(events)      # one row per event, nullable Int64 columns
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "Backend",
    "EventKind",
    "Event",
    "SiteKind",
    "FAILURE_KINDS",
    "LogTally",
    "TallyBuilder",
    "events_frame",
    "EVENT_COLUMNS",
]


class Backend(str, enum.Enum):
    """Which layer printed the message."""

    NCCL = "nccl"
    GLOO = "gloo"
    #: TCPStore / rendezvous (``DistStoreError``, ``Socket Timeout``)
    STORE = "store"
    DATALOADER = "dataloader"
    CUDA = "cuda"
    #: the launcher (torchrun / torch.distributed.elastic) or a Python exception of the program
    PROCESS = "process"
    UNKNOWN = "unknown"


class EventKind(str, enum.Enum):
    """What a message says happened. The value is the stable name used in ``--json``."""

    #: a collective ran past the process-group timeout (NCCL watchdog / blocking wait, gloo)
    COLLECTIVE_TIMEOUT = "collective_timeout"
    #: the watchdog's own status line: failing sequence number, last enqueued / completed work
    PG_STATUS = "pg_status"
    #: "ProcessGroupNCCL's watchdog got stuck for N seconds"
    WATCHDOG_STUCK = "watchdog_stuck"
    #: "Heartbeat monitor timed out!"
    HEARTBEAT = "heartbeat"
    #: TORCH_DISTRIBUTED_DEBUG=DETAIL fingerprint mismatch, or NCCL's "Mismatched collective"
    COLLECTIVE_MISMATCH = "collective_mismatch"
    #: "Rank k failed to pass monitoredBarrier" (named by rank 0)
    MONITORED_BARRIER = "monitored_barrier"
    #: gloo "Connection closed by peer", "Connection reset by peer", NCCL "closed by remote peer"
    PEER_CLOSED = "peer_closed"
    #: TCPStore / rendezvous timeouts ("k/n clients joined", "Socket Timeout", client socket, the
    #: store based barrier of ``init_process_group``, the NCCL unique id never published by rank 0)
    STORE_TIMEOUT = "store_timeout"
    #: "Waiting in store based barrier ..." progress line: who had arrived so far (not a failure)
    STORE_WAITING = "store_waiting"
    #: a connection could not be opened while setting up: the store client ("failed to connect",
    #: "Connection refused"), gloo's full mesh (``connectFullMesh``), the rendezvous backend
    CONNECT_FAILED = "connect_failed"
    DATALOADER_TIMEOUT = "dataloader_timeout"
    DATALOADER_WORKER_DIED = "dataloader_worker_died"
    TOO_MANY_OPEN_FILES = "too_many_open_files"
    #: ncclSystemError, ncclRemoteError, ncclUnhandledCudaError, "NCCL error in: ...", NCCL WARN
    NCCL_ERROR = "nccl_error"
    #: "Duplicate GPU detected : rank a and rank b both on CUDA device ..."
    DUPLICATE_GPU = "duplicate_gpu"
    #: "CUDA error: ...", "CUDA out of memory", NCCL "Cuda failure ..."
    CUDA_ERROR = "cuda_error"
    #: DDP's "Expected to have finished reduction in the prior iteration" (unused parameters)
    UNUSED_PARAMETERS = "unused_parameters"
    #: TORCH_NCCL_DESYNC_DEBUG report: which ranks never joined / lag behind (``named_ranks``)
    DESYNC_REPORT = "desync_report"
    #: flight-recorder / debug-dump lines ("Received a dump signal ... from rank k", stack traces)
    FLIGHT_RECORDER = "flight_recorder"
    #: a Python exception raised by the program on one rank (not a distributed error)
    PYTHON_EXCEPTION = "python_exception"
    #: the launcher reports a rank's process exit (torchrun failure summary, ``exitcode``)
    PROCESS_EXIT = "process_exit"
    #: a process was stopped from outside (``KeyboardInterrupt`` after Ctrl-C, the launcher's
    #: ``SignalException``): its traceback shows where that rank was at that moment (``site``)
    INTERRUPTED = "interrupted"


class SiteKind(str, enum.Enum):
    """Where a rank's Python traceback puts it (read from its frames)."""

    #: inside ``torch.distributed`` (a collective, or waiting for one)
    COLLECTIVE = "collective"
    #: inside ``torch.utils.data`` (the DataLoader, its dataset or sampler)
    DATA = "data"
    #: in the program's own code, outside both
    CODE = "code"


#: kinds that mean something went wrong on the rank that printed them (the others are context:
#: flight-recorder notices, launcher summaries). The watchdog's status line counts: it is only
#: printed when a work item of that rank failed.
FAILURE_KINDS: frozenset[EventKind] = frozenset(
    {
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.PG_STATUS,
        EventKind.WATCHDOG_STUCK,
        EventKind.HEARTBEAT,
        EventKind.COLLECTIVE_MISMATCH,
        EventKind.MONITORED_BARRIER,
        EventKind.PEER_CLOSED,
        EventKind.STORE_TIMEOUT,
        EventKind.CONNECT_FAILED,
        EventKind.DATALOADER_TIMEOUT,
        EventKind.DATALOADER_WORKER_DIED,
        EventKind.TOO_MANY_OPEN_FILES,
        EventKind.NCCL_ERROR,
        EventKind.DUPLICATE_GPU,
        EventKind.CUDA_ERROR,
        EventKind.UNUSED_PARAMETERS,
        EventKind.PYTHON_EXCEPTION,
        EventKind.INTERRUPTED,
    }
)


@dataclass(frozen=True)
class Event:
    """One recognised message in a log.

    Times are milliseconds because that is what the messages print (``Timeout(ms)=600000``,
    ``ran for 600017 milliseconds``); a store timeout printed in seconds is converted.
    """

    backend: Backend
    kind: EventKind
    #: global rank of the printing process, else the in-message rank (see module docstring)
    rank: int | None = None
    seq_num: int | None = None
    #: NCCL spelling: ALLREDUCE, ALLGATHER, _ALLGATHER_BASE, BARRIER, BROADCAST, REDUCE_SCATTER, ...
    op_type: str | None = None
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    pg_id: int | None = None
    pg_name: str | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    #: the logical line (wrapped lines joined), cut to at most 2,000 characters around the match
    line: str = ""
    #: 1-based physical line number where the matched message text starts (for a wrapped message,
    #: the line holding its first words; its ``[rankN]:`` prefix may be a line above)
    line_no: int = 0
    #: rank inside the process group when the message names one (``[Rank r]``, ``[PG ... Rank r]``)
    group_rank: int | None = None
    #: local rank from a launcher prefix (``[default3]:``)
    local_rank: int | None = None
    #: other ranks the message names: the late ranks of a monitored barrier, the peer of a
    #: mismatch, the rank that first signalled a timeout, the other rank on a duplicate GPU
    named_ranks: tuple[int, ...] = ()
    #: world size when the message states it (``1/4 clients joined`` -> 4)
    world_size: int | None = None
    #: how many ranks had arrived when the message was printed (``1/4 clients joined`` -> 1,
    #: ``num_workers_joined=3`` / ``worker_count=3`` of the store based barrier -> 3)
    arrived: int | None = None
    #: the TCPStore key waited for (``store_based_barrier_key:1``, ``/default_pg/0//cpu//0/1``)
    store_key: str | None = None
    #: ``host:port`` a connection was tried to (store master, gloo peer)
    address: str | None = None
    #: short specifics: NCCL error code, exception type and text, signal, ``recv``/``send``
    detail: str = ""
    #: the glog / launcher timestamp as printed (``E1206 18:44:12.715298746``), for reading only
    timestamp: str | None = None
    #: where the rank's Python traceback puts it, when the message ends one (see :class:`SiteKind`)
    site_kind: SiteKind | None = None
    #: the innermost frame of the program's own code in that traceback (``train.py:88 in evaluate``)
    site: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict with every field (enums as their string values)."""
        out = asdict(self)
        out["backend"] = self.backend.value
        out["kind"] = self.kind.value
        out["site_kind"] = self.site_kind.value if self.site_kind else None
        out["named_ranks"] = list(self.named_ranks)
        return out

    @property
    def is_failure(self) -> bool:
        """True when the event reports a failure on the printing rank (see ``FAILURE_KINDS``)."""
        return self.kind in FAILURE_KINDS


@dataclass(frozen=True)
class LogTally:
    """Counts over every event of a log, also those past the parser's event cap.

    The parser keeps the first ``MAX_EVENTS`` events (with their text) and counts all of them
    here, so that the job summary still sees every rank and every event of a huge log while memory
    stays bounded: what a tally keeps grows with the number of ranks, not with the log.
    """

    n_events: int = 0
    #: events kept in the event list (``n_events`` when nothing was capped)
    n_kept: int = 0
    unranked_failures: int = 0
    #: (rank, events of that rank), by rank
    events_per_rank: tuple[tuple[int, int], ...] = ()
    #: ranks with at least one failure event
    failure_ranks: tuple[int, ...] = ()
    #: ranks only named by other ranks' messages (late ranks, peers)
    named_ranks: tuple[int, ...] = ()
    #: the largest world size a message states
    stated_world_size: int | None = None
    #: ranks the launcher's exit summary lists
    launcher_ranks: tuple[int, ...] = ()
    #: each rank's first failure event (for ranks whose events were all past the cap)
    first_failures: tuple[Event, ...] = ()

    @property
    def capped(self) -> bool:
        return self.n_kept < self.n_events


class TallyBuilder:
    """Builds a :class:`LogTally` one event at a time (the parser's and ``summarize``'s helper)."""

    def __init__(self) -> None:
        self.n_events = 0
        self.n_kept = 0
        self.unranked_failures = 0
        self.per_rank: dict[int, int] = {}
        self.failure_ranks: set[int] = set()
        self.named: set[int] = set()
        self.world: int | None = None
        self.launcher: set[int] = set()
        self.first_failures: dict[int, Event] = {}

    def add(self, event: Event, kept: bool = True) -> None:
        self.n_events += 1
        self.n_kept += kept
        rank = event.rank
        failure = event.kind in FAILURE_KINDS
        if rank is not None:
            self.per_rank[rank] = self.per_rank.get(rank, 0) + 1
            if failure:
                self.failure_ranks.add(rank)
                if rank not in self.first_failures:
                    self.first_failures[rank] = event
            if event.kind is EventKind.PROCESS_EXIT:
                self.launcher.add(rank)
        elif failure and event.kind is not EventKind.INTERRUPTED:  # the launcher's own signal
            self.unranked_failures += 1
        if event.named_ranks:
            self.named.update(event.named_ranks)
        if event.world_size is not None and (self.world is None or event.world_size > self.world):
            self.world = event.world_size

    def build(self) -> LogTally:
        return LogTally(
            n_events=self.n_events,
            n_kept=self.n_kept,
            unranked_failures=self.unranked_failures,
            events_per_rank=tuple(sorted(self.per_rank.items())),
            failure_ranks=tuple(sorted(self.failure_ranks)),
            named_ranks=tuple(sorted(self.named)),
            stated_world_size=self.world,
            launcher_ranks=tuple(sorted(self.launcher)),
            first_failures=tuple(self.first_failures[r] for r in sorted(self.first_failures)),
        )

    @classmethod
    def of(cls, events: list[Event] | tuple[Event, ...]) -> LogTally:
        builder = cls()
        for event in events:
            builder.add(event)
        return builder.build()


#: column order of :func:`events_frame`
EVENT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Event))

_INT_COLUMNS = (
    "rank",
    "seq_num",
    "numel_in",
    "numel_out",
    "timeout_ms",
    "ran_for_ms",
    "pg_id",
    "last_enqueued",
    "last_completed",
    "line_no",
    "group_rank",
    "local_rank",
    "world_size",
    "arrived",
)
_STRING_COLUMNS = ("backend", "kind", "op_type", "pg_name", "line", "detail", "timestamp", "store_key", "address",
                   "site_kind", "site")


def events_frame(events: list[Event] | tuple[Event, ...]) -> pd.DataFrame:
    """Events -> one row per event, in log order.

    Integer columns use pandas' nullable ``Int64`` (missing is ``<NA>``, never ``-1``), text
    columns the ``string`` dtype, ``named_ranks`` a Python tuple per row. An empty list gives an
    empty frame with the same columns and dtypes::

        >>> from nccl_workbook.triage import parse_log
        >>> events_frame(parse_log("[Rank 1] Watchdog caught collective operation timeout: "
        ...     "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
        ...     "ran for 600013 milliseconds before timing out."))[["kind", "rank", "op_type"]]
                         kind  rank    op_type
        0  collective_timeout     1  ALLREDUCE
    """
    import pandas as pd

    rows = [e.to_json() for e in events]
    for row in rows:
        row["named_ranks"] = tuple(row["named_ranks"])
    frame = pd.DataFrame(rows, columns=list(EVENT_COLUMNS))
    for col in _INT_COLUMNS:
        frame[col] = frame[col].astype("Int64")
    for col in _STRING_COLUMNS:
        frame[col] = frame[col].astype("string")
    frame["named_ranks"] = frame["named_ranks"].astype(object)
    return frame
