"""Log text (any bytes) -> :class:`~nccl_workbook.triage.events.Event` list, in log order.

What it reads, from every PyTorch release since 1.x (examples in ``tests/data/logs/real``):

- NCCL watchdog timeouts with and without ``SeqNum``/``NumelIn`` (``WorkNCCL(OpType=..)`` of 1.x,
  ``WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, ...)`` of 2.x), blocking-wait timeouts,
  async NCCL exceptions;
- the watchdog's status line in its three wordings (``Exception (either an error or timeout)
  detected by watchdog at work: n``, ``Timeout at NCCL work: n``, ``failure detected by watchdog
  at work sequence id: n PG status: last enqueued work: e, last completed work: c``);
- ``[rankN]:[E… File.cpp:n]`` glog prefixes, ``[PG ID n PG GUID g(name) Rank r]`` and the older
  ``[PG n (name) Rank r]`` / ``[PG n Rank r]`` / ``[Rank r]``;
- heartbeat-monitor and stuck-watchdog messages, flight-recorder dump lines (``Received a dump
  signal … from rank k``), desync / ``CollectiveFingerPrint`` mismatch reports, NCCL's
  ``Mismatched collective``;
- gloo ``Timed out waiting Nms for recv/send operation``, ``Connection closed by peer``,
  ``Application timeout caused pair closure``, ``monitoredBarrier`` reports;
- TCPStore / rendezvous timeouts (``k/n clients joined``, ``Socket Timeout``, client socket with its
  ``host:port``), the store based barrier of ``init_process_group`` (who arrived, of how many, its
  key and timeout) and its ``Waiting in store based barrier`` progress line, gloo's set-up waiting
  for a rank's address key (which names the late rank), the NCCL unique id that rank 0 publishes
  through the store, the heartbeat monitor's ``"should dump" flag`` failure (the store is gone);
- connection set-up: ``Gloo connectFullMesh failed``, ``Connection refused``, the store client
  that ``failed to connect``, ``RendezvousConnectionError``, gloo's ``Unable to find address for``;
- DataLoader timeouts and worker deaths (also the worker's own ``bus error`` / ``segmentation
  fault`` lines), ``Too many open files``;
- ``Terminating the process after attempting to dump debug info, due to …`` (the process aborts
  itself: a watchdog hang, or after a timeout);
- ``ncclSystemError``/``ncclUnhandledCudaError``/``ncclRemoteError``/…, ``NCCL WARN``,
  ``Duplicate GPU detected``, CUDA errors, DDP's unused-parameter error, other Python exceptions
  raised on a rank, and the launcher's exit summary.

How it copes with real logs:

- launcher prefixes anywhere before the message (line numbers ``[80746]``, ``[default1]:``,
  host names, ``(Worker pid=…)``, mpirun ``[1,0]<stderr>:``, timestamps);
- lines wrapped by a terminal, even inside a word or a field name: a line of 48+ characters
  followed by a line that does not look like the start of a new record is joined to it, and every
  pattern allows whitespace between its words;
- several messages glued on one line (progress bars, two ranks writing at once): every match is
  its own event; ``\\r`` (progress-bar redraw) ends a record;
- any bytes: invalid UTF-8 is replaced, NULs and ANSI colour codes are dropped.

Limits: time is linear in the input. Every pattern is a literal anchor followed by bounded
repeats (no nested or unbounded wildcards), and fields are read from a bounded window around the
anchor, so a pathological line cannot make matching quadratic. A record is cut into 64 KiB
pieces. The log is decoded and read in pieces of about 4 MiB (cut at a line break), so its text is
never whole in memory; :func:`read_log` keeps the first ``MAX_EVENTS`` events and counts all of them
(:class:`~nccl_workbook.triage.events.LogTally`). Speed (``bench/triage_speed.py``, 2-core VM): 50 MiB
of real error output in about 5.5 s of CPU, a quiet log (NCCL INFO lines, progress bars) in about 2 s:
each record is first checked for the anchors' keywords, a block of 64 records at a time, and only the
anchors announced by a keyword are searched, each on its own. ``rank`` is the global rank when a ``[rankN]:`` or mpirun prefix says so; otherwise the
rank printed in the message, which is the rank inside ``pg_id``'s group (the same for the default
group).

Usage::

    from nccl_workbook.triage.parser import parse_log
    for event in parse_log(open("job.log", "rb").read()):
        print(event.line_no, event.kind.value, event.rank, event.op_type)
"""

from __future__ import annotations

import enum
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import MISSING, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import NamedTuple

from nccl_workbook.ops import op_or_none
from nccl_workbook.triage.events import Backend, Event, EventKind, LogTally, SiteKind, TallyBuilder

__all__ = ["parse_log", "read_log", "ParsedLog", "normalize_text", "iter_records", "Record", "Anchor", "ANCHORS",
           "MAX_EVENTS"]

#: a physical line at least this long may have been wrapped by a terminal
_WRAP_MIN_CHARS = 48
#: a joined record is cut when it grows past this
_MAX_RECORD_CHARS = 64 * 1024
#: ``Event.line`` keeps at most this many characters
_MAX_LINE_CHARS = 2000
#: how far before a match prefixes ([rankN]:, [PG …], [Rank r], glog header) are looked for
_HEAD_CHARS = 400
#: how far after a match its fields are looked for
_BODY_CHARS = 900
#: parse_log keeps at most this many events
MAX_EVENTS = 50_000
#: and at most this many from one logical record (64 KiB)
MAX_EVENTS_PER_RECORD = 256
#: how many physical lines a traceback frame stays the "current collective" of its rank
_CONTEXT_LINES = 60

_UINT64_LIMIT = 2**63  # NumelIn=18446744073709551615 is -1 printed as unsigned: unknown

# --------------------------------------------------------------------------------------------
# normalisation and records
# --------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]{0,32}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,256}(?:\x07|\x1b\\)?|[@-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])

# The start of a new log record. A physical line that does not match this and follows a long
# line is taken to be the continuation of a line wrapped by a terminal.
_RECORD_START = re.compile(
    r"""[ \t]{0,12}(?:
        [\[({#$>`*|=+-]
      | [IWEF]\d{3,4}[ \t]\d\d:
      | \d{4}-\d\d-\d\d
      | \d\d:\d\d:\d\d
      | (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ \t]{1,2}\d{1,2}[ \t]
      | Traceback[ \t]\(
      | File[ \t]"
      | frame[ \t]\#
      | Exception[ \t]raised
      | terminate[ \t]called
      | what\(\):
      | During[ \t]handling
      | The[ \t]above[ \t]exception
      | [\w.-]{1,64}:\d{1,8}:\d{1,8}[ \t]\[\d{1,4}\]
      | [A-Za-z_][\w.]{0,100}(?:Error|Exception|Warning|Interrupt|Exit)[ \t]{0,2}:
      | (?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|FATAL)\b
      | \d{1,3}%
      | Epoch[ \t]
    )""",
    re.VERBOSE,
)


def normalize_text(data: bytes | bytearray | memoryview | str) -> str:
    """Any bytes or text -> text the patterns can read.

    Invalid UTF-8 becomes U+FFFD, ``\\r\\n`` becomes ``\\n``, ANSI escape sequences and control
    characters other than tab, newline and carriage return are removed. Never raises for bytes
    or str input; anything else is a ``TypeError`` (a programming error, not bad log data).
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        if b"\x1b" not in raw:
            # the usual case, done on bytes (several times faster than on text); with ANSI escapes
            # the text path below keeps their terminators until the escapes are gone
            return raw.replace(b"\r\n", b"\n").translate(None, _CONTROL_BYTES).decode("utf-8", errors="replace")
        text = raw.decode("utf-8", errors="replace")
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(
            f"parse_log expects the log as bytes or str, got {type(data).__name__}; "
            "read the file with open(path, 'rb').read()"
        )
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n")
    if _CONTROL.search(text) is not None:
        text = _CONTROL.sub("", text)
    return text


class Record(NamedTuple):
    """One logical record: physical lines joined where a terminal wrapped them.

    ``starts`` holds ``(offset_in_text, physical_line_no)`` for every physical line in it, so a
    match anywhere in ``text`` maps back to the line it came from. (A named tuple rather than a
    frozen dataclass: a log of 50 MB makes half a million of them, and a tuple is built several
    times faster; it is as immutable.)
    """

    text: str
    starts: tuple[tuple[int, int], ...]

    @property
    def line_no(self) -> int:
        return self.starts[0][1]

    def line_no_at(self, offset: int) -> int:
        """Physical line number of character ``offset`` of ``text``."""
        line_no = self.starts[0][1]
        for start, number in self.starts:
            if start > offset:
                break
            line_no = number
        return line_no


def iter_records(text: str, first_line: int = 1) -> Iterator[Record]:
    """Physical lines -> logical records (terminal-wrapped lines joined; ``\r`` splits).
    ``first_line``: the number of the first line of ``text`` in the whole log."""
    parts: list[str] = []
    starts: list[tuple[int, int]] = []
    size = 0
    prev_len = 0
    record_start = _RECORD_START.match
    for line_no, physical in enumerate(text.split("\n"), first_line):
        pieces = physical.split("\r") if "\r" in physical else None
        for index, piece in enumerate(pieces or (physical,)):
            n = len(piece)
            if (
                prev_len >= _WRAP_MIN_CHARS  # only a long line can have been wrapped
                and index == 0  # a "\r" redraw starts a new record
                and parts
                and size + n <= _MAX_RECORD_CHARS
                and piece
                and not piece.isspace()
                and record_start(piece) is None
            ):
                starts.append((size, line_no))
                parts.append(piece)
                size += n
            else:
                if parts:
                    yield Record(parts[0] if len(parts) == 1 else "".join(parts), tuple(starts))
                # a single physical line longer than the cap is cut into pieces
                if n > _MAX_RECORD_CHARS:
                    cut = n - n % _MAX_RECORD_CHARS or n - _MAX_RECORD_CHARS
                    for offset in range(0, cut, _MAX_RECORD_CHARS):
                        yield Record(piece[offset:offset + _MAX_RECORD_CHARS], ((0, line_no),))
                    piece = piece[cut:]
                    n = len(piece)
                parts = [piece]
                starts = [(0, line_no)]
                size = n
            prev_len = n
    if parts and (size > 0 or len(starts) > 1):
        yield Record(parts[0] if len(parts) == 1 else "".join(parts), tuple(starts))


# --------------------------------------------------------------------------------------------
# patterns
# --------------------------------------------------------------------------------------------

_S = r"\s{0,4}"  # whitespace a wrap may have removed or added between words


def _words(phrase: str) -> str:
    """``"caught collective"`` -> ``caught\\s{0,4}collective`` (words may be split by a wrap)."""
    return _S.join(re.escape(w) for w in phrase.split())


# context only: which collective a rank was in (Python tracebacks, flight-recorder stacks)
_C10D_FRAME = re.compile(
    r"distributed_c10d\.py\"?,?\s{0,4}(?:line\s{0,4}\d{1,7},\s{0,4}in|:\d{1,7})\s{0,4}(\w{1,60})"
    r"|#\d{1,4}\s{1,4}(\w{1,60})\s{1,4}from\s{1,4}\S{0,300}distributed_c10d\.py"
    r"|distributed\.py\"?,\s{0,4}line\s{0,4}\d{1,7},\s{0,4}in\s{0,4}(_sync_\w{0,40}|_distributed_broadcast_coalesced|_verify_param\w{0,40})"
    r"|\.(backward)\(\s{0,4}\)"
)
# Python exception line (after prefixes): "ValueError: ...", "torch.OutOfMemoryError: ..."; the hint
# is what every such line contains ("c10::Error::Error(" of a C++ frame does not)
_EXCEPTION_HINT = re.compile(r"(?:Error|Exception)\s{0,4}:(?!:)")
_EXCEPTION_LINE = re.compile(
    r"(?:^|\]:?\s|\]\s|:\s)\s{0,8}((?:[A-Za-z_]\w{0,40}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception))"
    r"\s{0,4}:\s{0,4}([^\n]{0,200})"
)

# prefixes / context before the anchor
_RANK_PREFIX = re.compile(r"\[rank(\d{1,7})\]:")
_MPI_PREFIX = re.compile(r"\[\d{1,7},(\d{1,7})\]<std(?:out|err)>:")
_LOCAL_PREFIX = re.compile(r"\[(?!rank\d)([A-Za-z_][A-Za-z_]{0,30}?)(\d{1,5})\]:")
_PG_NEW = re.compile(
    r"\[PG\s{0,4}ID\s{0,4}(\d{1,9})\s{0,4}PG\s{0,4}GUID\s{0,4}([\w.:-]{1,80}?)\s{0,4}(?:\(([^()\]]{0,100})\))?"
    r"\s{0,4}Rank\s{0,4}(\d{1,7})\s{0,4}\]"
)
_PG_OLD = re.compile(r"\[PG\s{0,4}(\d{1,9})\s{0,4}(?:\(([^()\]]{0,100})\)\s{0,4})?Rank\s{0,4}(\d{1,7})\s{0,4}\]")
_RANK_BRACKET = re.compile(r"\[Rank\s{0,4}(\d{1,7})\s{0,4}\]")
_GLOG = re.compile(r"([IWEF]\d{3,4}\s\d\d:\d\d:\d\d(?:\.\d{1,9})?)")

# fields after (or around) the anchor
_WORK = re.compile(r"WorkNCCL\(")
_SEQ = re.compile(r"SeqNum\s{0,4}=\s{0,4}(\d{1,20})")
_OPTYPE = re.compile(r"OpType\s{0,4}=\s{0,4}([A-Z_][A-Z0-9_]{0,40})")
_NUMEL_IN = re.compile(r"NumelIn\s{0,4}=\s{0,4}(-?\d{1,20})")
_NUMEL_OUT = re.compile(r"NumelOut\s{0,4}=\s{0,4}(-?\d{1,20})")
_TIMEOUT_MS = re.compile(r"Timeout\s{0,4}\(\s{0,4}ms\s{0,4}\)\s{0,4}=\s{0,4}(\d{1,15})")
_RAN_FOR = re.compile(r"ran\s{0,4}for\s{0,4}(\d{1,15})\s{0,4}(?:milliseconds|ms)")
_ENQUEUED = re.compile(r"[Ll]ast\s{0,4}enqueued\s{0,4}(?:NCCL\s{0,4})?work\s{0,4}:\s{0,4}(-?\d{1,20})")
_COMPLETED = re.compile(r"last\s{0,4}completed\s{0,4}(?:NCCL\s{0,4})?work\s{0,4}:\s{0,4}(-?\d{1,20})")
_STATUS_SEQ = re.compile(r"work(?:\s{0,4}sequence\s{0,4}id)?\s{0,4}:\s{0,4}(\d{1,20})")
_FROM_RANK = re.compile(r"from\s{0,4}(?:this\s{0,4}local\s{0,4}rank|rank\s{0,4}(\d{1,7}))")
_STUCK_SECONDS = re.compile(r"stuck\s{0,4}for\s{0,4}(\d{1,9})\s{0,4}seconds")
_WORK_META = re.compile(r"workMetaList_\.size\(\)\s{0,4}=\s{0,4}(\d{1,9})")
_RUNNING = re.compile(r"Rank\s{0,4}(\d{1,7})\s{0,4}is\s{0,4}running")
_FP_SEQ = re.compile(r"SequenceNumber\s{0,4}=\s{0,4}(\d{1,20})")
_FP_SHAPE = re.compile(r"TensorShape\s{0,4}=\s{0,4}\[([\d,\s]{0,200})\]")
_BUT_RANK = re.compile(
    r"but\s{0,12}Rank\s{0,12}(\d{1,7})\s{0,12}is\s{0,12}running\s{0,12}(?:collective\s{0,12}:\s{0,12})?"
    r"(?:CollectiveFingerPrint\((?:SequenceNumber\s{0,4}=\s{0,4}\d{1,20},?\s{0,4})?OpType\s{0,4}=\s{0,4})?"
    r"([A-Z_][A-Z0-9_]{0,40})?"
)
_DIFFER = re.compile(r"differ\s{0,4}in\s{0,4}the\s{0,4}following\s{0,4}aspects\s{0,4}:\s{0,4}([^\n]{0,160})")
_NEAR_RANK = re.compile(r"rank\s{0,4}(\d{1,7})")
_MB_RANKS = re.compile(r"Ranks?\s{0,4}((?:\d{1,7}\s{0,4},?\s{0,4}){1,64})\s{0,4}(?:failed|timed)")
_MB_MS = re.compile(r"(?:in|after)\s{0,4}(\d{1,12})\s{0,4}ms")
_GLOO_TIMEOUT = re.compile(r"waiting\s{0,4}(\d{1,12})\s{0,4}ms\s{0,4}for\s{0,4}(recv|send)")
_STORE_CLIENTS = re.compile(
    r"after\s{0,4}(\d{1,12})\s{0,4}seconds\s{0,4}waiting\s{0,4}for\s{0,4}(?:clients|workers)\.?\s{0,4}"
    r"(\d{1,9})\s{0,4}/\s{0,4}(\d{1,9})"
)
_CLIENT_SOCKET = re.compile(
    r"(?:after\s{0,4}(\d{1,12})\s{0,4}(ms|s)?\s{0,4})?while\s{0,4}trying\s{0,4}to\s{0,4}connect\s{0,4}to\s{0,4}"
    r"\(([^()]{0,200})\)"
)
_STORE_WAIT = re.compile(r"after\s{0,4}(\d{1,12})\s{0,4}ms")
_DL_SECONDS = re.compile(r"after\s{0,4}(\d{1,9})\s{0,4}seconds")
_DL_WORKER = re.compile(
    r"pid\(?s?\)?\s{0,4}([\d,\s]{0,200})\)\s{0,4}(?:is\s{0,4}killed\s{0,4}by\s{0,4}signal\s{0,4}:\s{0,4}"
    r"([^.\n]{1,60})|(exited\s{0,4}unexpectedly))"
)
_NCCL_REASON = re.compile(r"error\s{0,4}(?:in\s{0,4}:\s{0,4}\S{0,300}?\s{0,4},|:)\s{0,4}([^,\n(]{1,120})")
_NCCL_CODE = re.compile(r"(nccl[A-Z][A-Za-z]{2,30})")
_NCCL_WARN_TEXT = re.compile(r"WARN\s{1,4}([^\n]{0,160})")
_DUP_GPU = re.compile(r"rank\s{0,4}(\d{1,7})\s{0,4}and\s{0,4}rank\s{0,4}(\d{1,7})\s{0,4}both\s{0,4}on\s{0,4}CUDA"
                      r"\s{0,4}device\s{0,4}(\w{1,20})")
_CUDA_TEXT = re.compile(r"error\s{0,4}:\s{0,4}([^\n.]{1,120})")
_DESYNC_AT = re.compile(r":\s{0,4}([A-Z_][A-Z0-9_]{0,40})\s{0,4},\s{0,4}#\s{0,4}(\d{1,20})")
_LAST_BRACKET_RANKS = re.compile(r"\[\s{0,4}(\d{1,7}(?:\s{0,4},\s{0,4}\d{1,7}){0,512})\s{0,4}\]")
_HASH_SEQ = re.compile(r"#\s{0,4}(\d{1,20})")
_GLUED_SENTENCE = re.compile(r"(?<=[a-z])(?=[A-Z]{2})")
_CUDA_FAILURE = re.compile(r"failure\s{0,4}(\d{0,6})\s{0,4}'([^'\n]{1,80})'")
_UNUSED_RANK = re.compile(r"did\s{0,4}not\s{0,4}receive\s{0,4}grad\s{0,4}for\s{0,4}rank\s{0,4}(\d{1,7})")
_ELASTIC_RANK = re.compile(r"rank\s{0,8}:\s{0,4}(\d{1,7})\s{0,4}\(\s{0,4}local_rank\s{0,4}:\s{0,4}(\d{1,7})")
_ELASTIC_EXIT = re.compile(r"exitcode\s{0,8}:\s{0,4}(-?\d{1,5})(?:[^\n]{0,40}?\((SIG\w{1,10})\))?")
_ELASTIC_FAILED = re.compile(
    r"exitcode\s{0,4}:\s{0,4}(-?\d{1,5})\s{0,4}\)\s{0,4}local_rank\s{0,4}:\s{0,4}(\d{1,7})"
)
_SPAWN = re.compile(r"Process\s{0,4}(\d{1,7})\s{0,4}terminated\s{0,4}with\s{0,4}([^\n]{0,80})")

_LAUNCHER_EXCEPTIONS = frozenset(
    {"ChildFailedError", "CalledProcessError", "SignalException", "KeyboardInterrupt", "SystemExit"}
)
_DIGITS = re.compile(r"\d{1,7}")
# the store based barrier of init_process_group / new_group (distributed_c10d._store_based_barrier)
_SBB_RANK = re.compile(r"rank\s{0,4}:?\s{0,4}(\d{1,7})")
_SBB_KEY = re.compile(r"key\s{0,4}:\s{0,4}([\w:./-]{1,120}?)\s{0,4}\(")
_SBB_WORLD = re.compile(r"world_size\s{0,4}=\s{0,4}(\d{1,7})")
_SBB_JOINED = re.compile(r"(?:worker_count|num_workers_joined)\s{0,4}=\s{0,4}(\d{1,7})")
# a Python timedelta as str() prints it: "0:00:30", "0:30:00.500000", "1 day, 2:00:00"
_TIMEDELTA = re.compile(r"timeout\s{0,4}=\s{0,4}(?:(\d{1,6})\s{0,4}days?,\s{0,4})?(\d{1,2}):(\d\d):(\d\d(?:\.\d{1,6})?)")
_STORE_KEYS = re.compile(r"keys?\s{0,4}:\s{0,4}([\w:./-]{1,200})")
# gloo's full-mesh rendezvous: each rank waits for the address key of every other rank
# (torch 2.13: "/default_pg/0//cpu//0/1" is rank 1's address in the default group)
_GLOO_ADDRESS_KEY = re.compile(r"//(?:cpu|cuda)//\d{1,4}/(\d{1,7})\b")
_UNIQUE_ID = re.compile(
    r"\[\s{0,4}(\d{1,7})\s{0,4}\]\s{0,4}is\s{0,4}setting\s{0,4}up\s{0,4}NCCL\s{0,4}communicator\s{0,4}and\s{0,4}$"
)
_UNIQUE_ID_KEY = re.compile(r"by\s{0,4}key\s{0,4}'([^'\n]{0,80})'")
_GOT_ERROR = re.compile(r"(?:got\s{0,4}error|with\s{0,4}error)\s{0,4}:\s{0,4}([^\n]{1,160}?)(?:\.\s{0,4}This|\n|$)")
_ADDRESS = re.compile(
    r"(?:remote\s{0,4}=\s{0,4}|connect(?:\s{0,4}to)?\s{0,4}|address\s{0,4}of\s{0,4})"
    r"\[?\(?([\w.:-]{1,100}?)\]?(?::|,\s{0,4})(\d{1,5})\)?"
)
_IFNAME = re.compile(r"address\s{0,4}for\s{0,4}:?\s{0,4}([\w.:-]{1,40})")
_TERMINATING_DUE = re.compile(r"due\s{0,4}to\s{0,4}([^\n.]{1,80})")


def _int(text: str | None) -> int | None:
    """Digits -> int; ``-1`` and uint64-wrapped negatives -> ``None`` (no sentinels)."""
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    if value < 0 or value >= _UINT64_LIMIT:
        return None
    return value


class _Head(NamedTuple):
    """Prefix information found before a match (a named tuple: one is read per event)."""

    rank: int | None = None
    local_rank: int | None = None
    group_rank: int | None = None
    pg_id: int | None = None
    pg_name: str | None = None
    timestamp: str | None = None


def _read_head(text: str) -> _Head:
    """Last ``[rankN]:``/mpirun/``[defaultN]:`` prefix, ``[PG …]``/``[Rank r]`` and glog time.
    (Each pattern runs only when its literal part is in the text: most heads have few of them.)"""
    rank = local = group = pg_id = None
    pg_name: str | None = None
    if "[rank" in text:
        for m in _RANK_PREFIX.finditer(text):
            rank = int(m.group(1))
    if rank is None and "<std" in text:
        for m in _MPI_PREFIX.finditer(text):
            rank = int(m.group(1))
    if "]:" in text:
        for m in _LOCAL_PREFIX.finditer(text):
            if m.group(1).lower() not in ("rank", "pg", "e", "w", "i", "f"):
                local = int(m.group(2))
    pg_end = -1
    if "[PG" in text:
        for m in _PG_NEW.finditer(text):
            pg_id, pg_name, group, pg_end = int(m.group(1)), m.group(3) or None, int(m.group(4)), m.end()
        if pg_end < 0:
            for m in _PG_OLD.finditer(text):
                pg_id, pg_name, group, pg_end = int(m.group(1)), m.group(2) or None, int(m.group(3)), m.end()
    if "[Rank" in text:
        for m in _RANK_BRACKET.finditer(text):
            if m.start() >= pg_end:
                group = int(m.group(1))
    stamp = None
    if ":" in text:
        for m in _GLOG.finditer(text):
            stamp = m.group(1)
    return _Head(rank, local, group, pg_id, pg_name.strip() if pg_name else None, stamp)


@dataclass
class _State:
    """What the parser remembers between records."""

    #: rank key -> (op_type, physical line) of the last collective seen in a traceback
    frames: dict[int | None, tuple[str, int]]
    #: mp.spawn "-- Process k terminated" context: (rank, until line)
    spawn_rank: tuple[int, int] | None = None
    #: the next launcher rank block is the root cause
    root_cause_pending: bool = False
    #: the last [rankN]: prefix seen at the start of a record: (rank, line)
    prefix_rank: tuple[int, int] | None = None
    #: rank key -> the frames of the Python traceback it is printing (see :class:`_Stack`)
    stacks: dict[int | None, _Stack] = field(default_factory=dict)


@dataclass
class _Stack:
    """The frames of one traceback as they are printed: ``(path, line, function)``, innermost last
    (``Traceback (most recent call last)``) or first (faulthandler's ``(most recent call first)``)."""

    start_line: int
    newest_first: bool
    frames: list[tuple[str, int, str]] = field(default_factory=list)
    #: (number of frames, classify_stack of them): the events that end one traceback share it
    site: tuple[int, tuple[SiteKind, str] | None] = (-1, None)

    def innermost_last(self) -> list[tuple[str, int, str]]:
        return self.frames[::-1] if self.newest_first else self.frames


def _frame_op(state: _State, rank: int | None, line_no: int) -> str | None:
    for key in (rank, None):
        got = state.frames.get(key)
        if got is not None and line_no - got[1] <= _CONTEXT_LINES:
            return got[0]
    return None


def _update_frames(state: _State, text: str, rank: int | None, line_no: int) -> None:
    for m in _C10D_FRAME.finditer(text):
        name = m.group(1) or m.group(2) or m.group(3) or m.group(4)
        op = op_or_none(name)
        if op is not None:
            state.frames[rank] = (op, line_no)


# a Python stack: where each rank was when its traceback was printed
_TB_FRAME = re.compile(r'File "([^"\n]{1,400})", line (\d{1,7}),? in ([\w<>.]{1,80})')
_TB_START = "Traceback (most recent call last)"
_FH_START = "(most recent call first)"
#: the frames kept of one traceback (a deep recursion prints thousands)
_MAX_FRAMES = 64
#: how many physical lines after its first line a traceback still describes the event that ends it
_STACK_LINES = 400
# a bare ``KeyboardInterrupt`` line, the last line of the traceback of a rank stopped by Ctrl-C
_INTERRUPT = re.compile(r"(?:^|\]:?)\s{0,8}KeyboardInterrupt\s*$")
#: frames of these files are the launcher's or the library's, not the program's
_LIBRARY_PATHS = ("site-packages", "dist-packages", "/lib/python3", "<frozen", "/usr/lib/")
_LAUNCHER_PATHS = ("/torch/distributed/elastic/", "/torch/distributed/run.py", "/torch/distributed/launcher/")


def _update_stack(state: _State, text: str, rank: int | None, line_no: int) -> None:
    """Follow the traceback a rank is printing: a new one starts, or one more frame."""
    if _TB_START in text or _FH_START in text:
        state.stacks[rank] = _Stack(line_no, newest_first=_FH_START in text)
        return
    m = _TB_FRAME.search(text)
    if m is None:
        return
    stack = state.stacks.get(rank)
    if stack is None or line_no - stack.start_line > _STACK_LINES:
        return
    frames = stack.frames
    if len(frames) >= _MAX_FRAMES:
        if stack.newest_first:
            return  # the innermost frames came first and are kept
        del frames[0]
    frames.append((m.group(1), int(m.group(2)), m.group(3)))


def classify_stack(frames: list[tuple[str, int, str]]) -> tuple[SiteKind, str] | None:
    """Frames ``(path, line, function)``, innermost last -> where the rank was, and the innermost
    frame of the program's own code (``train.py:88 in evaluate``).

    >>> classify_stack([("/w/train.py", 30, "main"),
    ...                 ("/v/site-packages/torch/utils/data/dataloader.py", 725, "__next__"),
    ...                 ("/w/data.py", 12, "__getitem__")])
    (<SiteKind.DATA: 'data'>, 'data.py:12 in __getitem__')
    """
    frames = [f for f in frames if not any(p in f[0] for p in _LAUNCHER_PATHS)]
    if not frames:
        return None
    own = [f for f in frames if not any(p in f[0] for p in _LIBRARY_PATHS)]
    path, line, func = (own or frames)[-1]
    site = f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line} in {func}"
    paths = [f[0].replace("\\", "/") for f in frames]
    if any("/torch/distributed/" in p or "distributed_c10d" in p for p in paths):
        return SiteKind.COLLECTIVE, site
    if any("/torch/utils/data/" in p for p in paths):
        return SiteKind.DATA, site
    return SiteKind.CODE, site


def _site_of(state: _State, rank: int | None, line_no: int) -> tuple[SiteKind, str] | None:
    stack = state.stacks.get(rank)
    if stack is None or not stack.frames or line_no - stack.start_line > _STACK_LINES:
        return None
    if stack.site[0] != len(stack.frames):
        stack.site = (len(stack.frames), classify_stack(stack.innermost_last()))
    return stack.site[1]


def _backend_for_peer(near: str, window: str) -> Backend:
    """Which layer lost its peer: ``near`` is the text right around the match."""
    if "store" in near.lower() or "DistNetworkError" in near:
        return Backend.STORE
    if "gloo" in window or "pair.cc" in window:
        return Backend.GLOO
    if "NCCL" in window or "socketProgress" in window or "NET/" in window:
        return Backend.NCCL
    return Backend.UNKNOWN


def _work_fields(window: str) -> dict[str, int | str | None]:
    """Fields of a ``WorkNCCL(...)`` description anywhere in ``window``."""
    m = _WORK.search(window)
    part = window[m.start():m.start() + 500] if m else window
    seq = _SEQ.search(part)
    op = _OPTYPE.search(part)
    n_in = _NUMEL_IN.search(part)
    n_out = _NUMEL_OUT.search(part)
    tmo = _TIMEOUT_MS.search(part)
    ran = _RAN_FOR.search(window)
    return {
        "seq_num": _int(seq.group(1)) if seq else None,
        "op_type": op.group(1) if op else None,
        "numel_in": _int(n_in.group(1)) if n_in else None,
        "numel_out": _int(n_out.group(1)) if n_out else None,
        "timeout_ms": _int(tmo.group(1)) if tmo else None,
        "ran_for_ms": _int(ran.group(1)) if ran else None,
    }


def _status_fields(window: str) -> dict[str, int | None]:
    seq = _STATUS_SEQ.search(window)
    enq = _ENQUEUED.search(window)
    comp = _COMPLETED.search(window)
    return {
        "seq_num": _int(seq.group(1)) if seq else None,
        "last_enqueued": _int(enq.group(1)) if enq else None,
        "last_completed": _int(comp.group(1)) if comp else None,
    }


def _cut_line(text: str, at: int) -> str:
    if len(text) <= _MAX_LINE_CHARS:
        return text
    start = max(0, at - 500)
    return ("…" if start else "") + text[start:start + _MAX_LINE_CHARS - 2] + "…"


# --------------------------------------------------------------------------------------------
# anchor handlers: (text just before the match, text from the match on) -> event fields or None
# --------------------------------------------------------------------------------------------

_Fields = dict[str, object]
#: ``handler(head, body)``: ``head`` is the text just before the match, ``body`` starts at it
Handler = Callable[[str, str], "_Fields | None"]


def _nccl_timeout(detail: str, own_window: bool) -> Handler:
    """Watchdog (``own_window``: the WorkNCCL follows) or blocking-wait timeout (it precedes)."""

    def handle(head: str, body: str) -> _Fields:
        fields = _work_fields(body if own_window else head[-300:] + body)
        return {"kind": EventKind.COLLECTIVE_TIMEOUT, "backend": Backend.NCCL, "detail": detail, **fields}

    return handle


def _async_exception(head: str, body: str) -> _Fields:
    fields = _work_fields(head[-300:] + body)
    reason = _NCCL_REASON.search(body)
    code = _NCCL_CODE.search(body)
    detail = " ".join(x for x in (code.group(1) if code else "", reason.group(1).strip() if reason else "") if x)
    return {"kind": EventKind.NCCL_ERROR, "backend": Backend.NCCL, "detail": detail or "async NCCL error", **fields}


def _pg_status(head: str, body: str) -> _Fields:
    fields = _status_fields(body)
    seq = fields["seq_num"]
    return {"kind": EventKind.PG_STATUS, "backend": Backend.NCCL,
            "detail": f"watchdog: work {seq} failed" if seq is not None else "watchdog status", **fields}


def _dump_signal(head: str, body: str) -> _Fields:
    fields = _status_fields(body)
    fields["seq_num"] = None
    src = _FROM_RANK.search(body[:200])
    detail = "dump signal"
    named: tuple[int, ...] = ()
    if src is not None and src.group(1) is not None:
        named = (int(src.group(1)),)
        detail = f"dump signal from rank {src.group(1)}"
    elif src is not None:
        detail = "dump signal from this local rank"
    return {"kind": EventKind.FLIGHT_RECORDER, "backend": Backend.NCCL, "detail": detail, "named_ranks": named,
            **fields}


def _fr_prepare(head: str, body: str) -> _Fields:
    return {"kind": EventKind.FLIGHT_RECORDER, "backend": Backend.NCCL, "detail": "preparing to dump debug info"}


def _fr_stack(head: str, body: str) -> _Fields:
    missing = "not found" in body[:80]
    return {"kind": EventKind.FLIGHT_RECORDER, "backend": Backend.NCCL,
            "detail": "flight recorder disabled: no stack of the failed collective" if missing
            else "stack trace of the failed collective"}


def _fr_written(head: str, body: str) -> _Fields:
    target = body.split("to", 1)[-1].strip().split()[:1]
    return {"kind": EventKind.FLIGHT_RECORDER, "backend": Backend.NCCL,
            "detail": "flight recorder dump written" + (f" to {target[0]}" if target else "")}


def _watchdog_stuck(head: str, body: str) -> _Fields:
    sec = _STUCK_SECONDS.search(body[:80])
    return {"kind": EventKind.WATCHDOG_STUCK, "backend": Backend.NCCL,
            "timeout_ms": int(sec.group(1)) * 1000 if sec else None,
            "detail": "watchdog stuck (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)"}


def _desync_timeout(head: str, body: str) -> _Fields:
    m = _DESYNC_AT.search(body[:160])
    own = _LAST_BRACKET_RANKS.search(head[-40:])
    return {"kind": EventKind.DESYNC_REPORT, "backend": Backend.NCCL,
            "op_type": m.group(1) if m else None, "seq_num": _int(m.group(2)) if m else None,
            "group_rank": int(own.group(1).split(",")[0]) if own else None,
            "detail": "desync report: timed out collective"}


def _desync_ranks(what: str) -> Handler:
    """A desync-report line that names ranks in brackets before ``what`` they did."""

    def handle(head: str, body: str) -> _Fields:
        ranks = None
        for ranks in _LAST_BRACKET_RANKS.finditer(head[-300:]):
            pass
        named = tuple(int(x) for x in _DIGITS.findall(ranks.group(1))) if ranks else ()
        seq = _HASH_SEQ.search(body[:120])
        return {"kind": EventKind.DESYNC_REPORT, "backend": Backend.NCCL, "named_ranks": named,
                "seq_num": _int(seq.group(1)) if seq else None,
                "detail": f"desync report: rank(s) {', '.join(map(str, named)) or '?'} {what}"}

    return handle


def _heartbeat(head: str, body: str) -> _Fields:
    meta = _WORK_META.search(body[:200])
    return {"kind": EventKind.HEARTBEAT, "backend": Backend.NCCL,
            "detail": f"heartbeat monitor timed out; {meta.group(1)} work items pending" if meta
            else "heartbeat monitor timed out"}


def _fingerprint_mismatch(head: str, body: str) -> _Fields:
    runs = _RUNNING.search(body[:2000])
    op = _OPTYPE.search(body[:1200])
    seq = _FP_SEQ.search(body[:1200])
    shape = _FP_SHAPE.search(body[:1200])
    but = _BUT_RANK.search(body[:2000])
    differ = _DIFFER.search(body[:3000])
    parts = []
    if shape:
        parts.append(f"shape [{' '.join(shape.group(1).split())}]")
    if but is not None:
        parts.append(f"rank {but.group(1)} runs {but.group(2) or 'a different collective'}")
    if differ:
        parts.append(f"differ in: {' '.join(differ.group(1).split())}")
    device = body[:1500]
    backend = Backend.NCCL if "device=cuda" in device else Backend.GLOO if "device=cpu" in device else Backend.UNKNOWN
    return {"kind": EventKind.COLLECTIVE_MISMATCH, "backend": backend,
            "op_type": op.group(1) if op else None, "seq_num": _int(seq.group(1)) if seq else None,
            "group_rank": int(runs.group(1)) if runs else None, "named_ranks": (int(but.group(1)),) if but else (),
            "detail": "; ".join(parts) or "collective mismatch"}


def _nccl_mismatch(head: str, body: str) -> _Fields:
    near = _NEAR_RANK.search(body[:200])
    return {"kind": EventKind.COLLECTIVE_MISMATCH, "backend": Backend.NCCL,
            "named_ranks": (int(near.group(1)),) if near else (), "detail": "NCCL: mismatched collective"}


def _monitored_barrier(head: str, body: str) -> _Fields:
    ranks = _MB_RANKS.search(head[-200:] + body[:40])
    named = tuple(int(x) for x in _DIGITS.findall(ranks.group(1))) if ranks else ()
    ms = _MB_MS.search(body[:120])
    return {"kind": EventKind.MONITORED_BARRIER, "backend": Backend.GLOO, "op_type": "BARRIER",
            "timeout_ms": _int(ms.group(1)) if ms else None, "named_ranks": named,
            "detail": "late ranks: " + ", ".join(map(str, named)) if named else "monitored barrier failed"}


def _gloo_timeout(head: str, body: str) -> _Fields:
    m = _GLOO_TIMEOUT.search(body[:120])
    return {"kind": EventKind.COLLECTIVE_TIMEOUT, "backend": Backend.GLOO,
            "timeout_ms": _int(m.group(1)) if m else None, "detail": m.group(2) if m else ""}


def _peer_closed(head: str, body: str) -> _Fields:
    backend = _backend_for_peer(head[-80:] + body[:80], head[-200:] + body[:200])
    return {"kind": EventKind.PEER_CLOSED, "backend": backend, "detail": " ".join(body[:80].split()).rstrip(".")}


def _fixed(kind: EventKind, backend: Backend, detail: str) -> Handler:
    """A message whose event has no fields beyond its kind, backend and a fixed detail."""

    def handle(head: str, body: str) -> _Fields:
        return {"kind": kind, "backend": backend, "detail": detail}

    return handle


def _store_clients(head: str, body: str) -> _Fields:
    m = _STORE_CLIENTS.search(body[:160])
    if m is None:
        return {"kind": EventKind.STORE_TIMEOUT, "backend": Backend.STORE}
    joined, expected = int(m.group(2)), int(m.group(3))
    return {"kind": EventKind.STORE_TIMEOUT, "backend": Backend.STORE, "timeout_ms": int(m.group(1)) * 1000,
            "world_size": expected, "arrived": joined, "detail": f"{joined}/{expected} clients joined"}


def _client_socket(head: str, body: str) -> _Fields:
    m = _CLIENT_SOCKET.search(body[:300])
    if m is None:
        return {"kind": EventKind.STORE_TIMEOUT, "backend": Backend.STORE, "detail": "client socket timed out"}
    value = _int(m.group(1))
    host_port = ", ".join(part.strip() for part in m.group(3).split(","))
    return {"kind": EventKind.STORE_TIMEOUT, "backend": Backend.STORE,
            "timeout_ms": value * 1000 if value is not None and m.group(2) == "s" else value,
            "address": ":".join(part.strip() for part in m.group(3).rsplit(",", 1)),
            "detail": f"could not connect to ({host_port})"}


def _store_wait(head: str, body: str) -> _Fields:
    m = _STORE_WAIT.search(body[:60])
    keys = _STORE_KEYS.search(body[:300])
    key = keys.group(1) if keys else None
    awaited = _GLOO_ADDRESS_KEY.search(key) if key else None
    fields: _Fields = {"kind": EventKind.STORE_TIMEOUT, "backend": Backend.STORE,
                       "timeout_ms": _int(m.group(1)) if m else None, "store_key": key, "detail": "store wait timeout"}
    if awaited is not None:
        fields["named_ranks"] = (int(awaited.group(1)),)
        fields["detail"] = f"store wait timeout: gloo set-up waited for rank {awaited.group(1)}'s address"
    return fields


def _timedelta_ms(text: str) -> int | None:
    m = _TIMEDELTA.search(text)
    if m is None:
        return None
    days = int(m.group(1) or 0)
    return round(((days * 24 + int(m.group(2))) * 3600 + int(m.group(3)) * 60 + float(m.group(4))) * 1000)


def _store_barrier(waiting: bool) -> Handler:
    """The store based barrier of ``init_process_group``: timed out, or still waiting."""

    def handle(head: str, body: str) -> _Fields:
        window = body[:600]
        rank = _SBB_RANK.search(window)
        key = _SBB_KEY.search(window)
        world = _SBB_WORLD.search(window)
        joined = _SBB_JOINED.search(window)
        arrived, expected = (_int(joined.group(1)) if joined else None), (_int(world.group(1)) if world else None)
        count = f"{arrived}/{expected} ranks arrived" if arrived is not None and expected is not None else ""
        what = "waiting in the store based barrier of init" if waiting else "init timed out in the store based barrier"
        return {"kind": EventKind.STORE_WAITING if waiting else EventKind.STORE_TIMEOUT, "backend": Backend.STORE,
                "rank": int(rank.group(1)) if rank else None, "store_key": key.group(1) if key else None,
                "world_size": expected, "arrived": arrived, "timeout_ms": _timedelta_ms(window),
                "detail": f"{what}: {count}" if count else what}

    return handle


def _unique_id(head: str, body: str) -> _Fields:
    """A rank could not read the NCCL unique id that rank 0 publishes through the store."""
    rank = _UNIQUE_ID.search(head[-120:])
    key = _UNIQUE_ID_KEY.search(body[:200])
    error = _GOT_ERROR.search(body[:500])
    reason = " ".join(error.group(1).split()) if error else ""
    timed_out = "imeout" in reason or "timed out" in reason
    fields: _Fields = {"kind": EventKind.STORE_TIMEOUT if timed_out else EventKind.PEER_CLOSED,
                       "backend": Backend.STORE, "store_key": key.group(1) if key else None,
                       "named_ranks": (0,),
                       "detail": "NCCL unique id from rank 0 not in the store" + (f": {reason}" if reason else "")}
    if rank is not None:
        fields["rank"] = int(rank.group(1))
    timeout = _STORE_WAIT.search(reason)
    if timeout is not None:
        fields["timeout_ms"] = _int(timeout.group(1))
    return fields


def _store_flag(head: str, body: str) -> _Fields:
    """The heartbeat monitor could not read the dump flag from the TCPStore: the store is gone."""
    error = _GOT_ERROR.search(body[:400])
    if error is None:
        tail = body[:200].split("store", 1)[-1].lstrip(".: ")
        reason = " ".join(tail.split()[:12])
    else:
        reason = " ".join(error.group(1).split())
    return {"kind": EventKind.PEER_CLOSED, "backend": Backend.STORE,
            "detail": "TCPStore unreachable from the heartbeat monitor" + (f": {reason}" if reason else "")}


def _connect_failed(backend: Backend | None, what: str) -> Handler:
    """A connection that could not be opened; ``backend=None``: decided by the text around it."""

    def handle(head: str, body: str) -> _Fields:
        near = head[-200:] + body[:200]
        chosen = backend or _backend_for_connect(near)
        address = _ADDRESS.search(head[-120:] + body[:160])
        reason = " ".join(body[:160].split("\n", 1)[0].split())
        return {"kind": EventKind.CONNECT_FAILED, "backend": chosen,
                "address": f"{address.group(1)}:{address.group(2)}" if address else None,
                "detail": f"{what}: {reason}"[:200] if what else reason[:200]}

    return handle


def _backend_for_connect(near: str) -> Backend:
    if "gloo" in near or "Gloo" in near or "pair.cc" in near:
        return Backend.GLOO
    if "TCPStore" in near or "socket.cpp" in near or "store" in near.lower() or "c10d" in near:
        return Backend.STORE
    if "NCCL" in near or "NET/" in near:
        return Backend.NCCL
    return Backend.UNKNOWN


def _gloo_interface(head: str, body: str) -> _Fields:
    name = _IFNAME.search(body[:120])
    return {"kind": EventKind.CONNECT_FAILED, "backend": Backend.GLOO,
            "detail": f"gloo found no address for interface {name.group(1) if name else '?'} (GLOO_SOCKET_IFNAME)"}


def _terminating(head: str, body: str) -> _Fields:
    """``Terminating the process after attempting to dump debug info, due to <reason>.`` (SIGABRT)."""
    due = _TERMINATING_DUE.search(body[:200])
    reason = " ".join(due.group(1).split()) if due else ""
    if "hang" in reason:
        return {"kind": EventKind.WATCHDOG_STUCK, "backend": Backend.NCCL,
                "detail": f"process terminated after the debug dump, due to {reason}"}
    return {"kind": EventKind.FLIGHT_RECORDER, "backend": Backend.NCCL,
            "detail": "process terminated (SIGABRT) after the debug dump" + (f", due to {reason}" if reason else "")}


def _worker_signal(detail: str) -> Handler:
    def handle(head: str, body: str) -> _Fields:
        return {"kind": EventKind.DATALOADER_WORKER_DIED, "backend": Backend.DATALOADER, "detail": detail}

    return handle


def _dataloader_timeout(head: str, body: str) -> _Fields:
    m = _DL_SECONDS.search(body[:80])
    return {"kind": EventKind.DATALOADER_TIMEOUT, "backend": Backend.DATALOADER,
            "timeout_ms": int(m.group(1)) * 1000 if m else None}


def _dataloader_worker(head: str, body: str) -> _Fields:
    m = _DL_WORKER.search(body[:300])
    if m is None:
        return {"kind": EventKind.DATALOADER_WORKER_DIED, "backend": Backend.DATALOADER}
    pids = " ".join(m.group(1).replace(",", " ").split())
    how = f"killed by signal: {m.group(2).strip()}" if m.group(2) else "exited unexpectedly"
    return {"kind": EventKind.DATALOADER_WORKER_DIED, "backend": Backend.DATALOADER,
            "detail": f"worker pid {pids} {how}"}


def _open_files(detail: str, always_dataloader: bool) -> Handler:
    """``Too many open files`` (a DataLoader's when the text around says so) or gloo's ancdata."""

    def handle(head: str, body: str) -> _Fields:
        dl = (always_dataloader or "Communication with the workers" in body[:200]
              or "sharing strategy" in body[:400] or "dataloader" in head[-300:].lower())
        return {"kind": EventKind.TOO_MANY_OPEN_FILES, "backend": Backend.DATALOADER if dl else Backend.PROCESS,
                "detail": detail}

    return handle


def _nccl_error(head: str, body: str) -> _Fields:
    reason = _NCCL_REASON.search(body[:500])
    return {"kind": EventKind.NCCL_ERROR, "backend": Backend.NCCL,
            "detail": " ".join(reason.group(1).split()) if reason else "NCCL error"}


def _nccl_code(head: str, body: str) -> _Fields:
    code = _NCCL_CODE.search(body[:40])
    return {"kind": EventKind.NCCL_ERROR, "backend": Backend.NCCL, "detail": code.group(1) if code else "NCCL error"}


def _nccl_warn(head: str, body: str) -> _Fields:
    text = _NCCL_WARN_TEXT.search(body[:200])
    return {"kind": EventKind.NCCL_ERROR, "backend": Backend.NCCL,
            "detail": "NCCL WARN " + " ".join(text.group(1).split()) if text else "NCCL WARN"}


def _duplicate_gpu(head: str, body: str) -> _Fields:
    m = _DUP_GPU.search(body[:200])
    if m is None:
        return {"kind": EventKind.DUPLICATE_GPU, "backend": Backend.NCCL, "detail": "duplicate GPU"}
    return {"kind": EventKind.DUPLICATE_GPU, "backend": Backend.NCCL, "group_rank": int(m.group(1)),
            "named_ranks": (int(m.group(2)),),
            "detail": f"rank {m.group(1)} and rank {m.group(2)} on CUDA device {m.group(3)}"}


def _cuda_error(head: str, body: str) -> _Fields:
    m = _CUDA_TEXT.search(body[:160])
    # a joined wrap can glue the next sentence on ("...encounteredCUDA kernel errors"): cut there
    text = _GLUED_SENTENCE.split(" ".join(m.group(1).split()), maxsplit=1)[0] if m else ""
    return {"kind": EventKind.CUDA_ERROR, "backend": Backend.CUDA, "detail": "CUDA error: " + text if text else "CUDA error"}


def _cuda_failure(head: str, body: str) -> _Fields:
    m = _CUDA_FAILURE.search(body[:140])
    return {"kind": EventKind.CUDA_ERROR, "backend": Backend.NCCL,
            "detail": f"Cuda failure {m.group(1)} '{m.group(2)}'".replace("  ", " ") if m else "Cuda failure"}


def _unused_parameters(head: str, body: str) -> _Fields:
    m = _UNUSED_RANK.search(body[:3000])
    return {"kind": EventKind.UNUSED_PARAMETERS, "backend": Backend.PROCESS,
            "named_ranks": (int(m.group(1)),) if m else (),
            "detail": "DDP: parameters did not receive gradients (unused parameters)"}


def _elastic_rank(head: str, body: str) -> _Fields | None:
    m = _ELASTIC_RANK.search(body[:80])
    if m is None:
        return None
    return {"kind": EventKind.PROCESS_EXIT, "backend": Backend.PROCESS, "rank": int(m.group(1)),
            "local_rank": int(m.group(2)), "detail": "launcher: process exited"}


def _elastic_failed(head: str, body: str) -> _Fields | None:
    m = _ELASTIC_FAILED.search(body[:120])
    if m is None:
        return None
    return {"kind": EventKind.PROCESS_EXIT, "backend": Backend.PROCESS, "local_rank": int(m.group(2)),
            "detail": f"launcher: local_rank {m.group(2)} failed with exitcode {m.group(1)}"}


def _spawn_process(head: str, body: str) -> _Fields | None:
    m = _SPAWN.search(body[:160])
    if m is None:
        return None
    return {"kind": EventKind.PROCESS_EXIT, "backend": Backend.PROCESS, "rank": int(m.group(1)),
            "detail": f"process {m.group(1)} terminated with {m.group(2).strip()}"}


# --------------------------------------------------------------------------------------------
# the anchors: one record per recognised message
# --------------------------------------------------------------------------------------------


class StateChange(str, enum.Enum):
    """What an anchor that makes no event of its own changes in the parser's state."""

    #: ``Root Cause (first observed failure):``: the next launcher rank block is the root cause
    ROOT_CAUSE_NEXT = "root_cause_next"
    #: ``exitcode : 1 (pid: …)`` under a launcher rank block: added to that event's detail
    EXITCODE = "exitcode"


@dataclass(frozen=True)
class Anchor:
    """One message the parser recognises.

    ``pattern`` starts with a literal and has only bounded repeats. ``keywords``: substrings one of
    which every match contains (the cheap prefilter: plain ``in`` checks are ~100x faster than
    the combined regex on ordinary lines); each must be a single word of the pattern, so that a
    terminal wrap (which may add or remove whitespace between words) cannot break it.
    ``example`` is a minimal text the anchor matches (the tests check each one).
    """

    name: str
    pattern: str
    keywords: tuple[str, ...]
    example: str
    #: fields of the event; ``None`` for an anchor that only changes parser state
    handle: Handler | None
    state: StateChange | None = None
    #: dropped when a more specific anchor follows within ``_SPECIFIC_AFTER`` characters
    generic: bool = False
    #: the message runs this many characters from the match: other anchors inside it (the error
    #: it quotes: "... got error: Socket Timeout") make no events of their own
    span: int = 0


def _anchor(name: str, pattern: str, keywords: str | tuple[str, ...], example: str, handle: Handler | None,
            state: StateChange | None = None, generic: bool = False, span: int = 0) -> Anchor:
    return Anchor(name, pattern, (keywords,) if isinstance(keywords, str) else keywords, example, handle,
                  state=state, generic=generic, span=span)


_K, _B = EventKind, Backend
ANCHORS: tuple[Anchor, ...] = (
    _anchor("watchdog_timeout", _words("Watchdog caught collective operation timeout"), "atchdog",
            "Watchdog caught collective operation timeout", _nccl_timeout("watchdog", own_window=True)),
    _anchor("blocking_wait", _words("timed out in blocking wait"), "blocking",
            "Work WorkNCCL(SeqNum=1) timed out in blocking wait", _nccl_timeout("blocking wait", own_window=False)),
    _anchor("async_exception", _words("raised the following async exception"), "following",
            "Collective WorkNCCL(SeqNum=1) raised the following async exception: x", _async_exception),
    _anchor("status_new", _words("failure detected by watchdog at work sequence id"), "atchdog",
            "failure detected by watchdog at work sequence id: 3", _pg_status),
    _anchor("status_mid", _words("Exception (either an error or timeout) detected by watchdog at work"), "atchdog",
            "Exception (either an error or timeout) detected by watchdog at work: 3", _pg_status),
    _anchor("status_old", _words("Timeout at NCCL work") + r"\s{0,4}:", "imeout",
            "Timeout at NCCL work: 3, last enqueued NCCL work: 3", _pg_status),
    _anchor("dump_signal", _words("Received a dump signal"), "Received",
            "Received a dump signal due to a collective timeout from rank 1", _dump_signal),
    _anchor("timeout_signal", _words("Received a timeout signal"), "Received",
            "Received a timeout signal from this local rank", _dump_signal),
    _anchor("fr_prepare", _words("preparing to dump debug info"), "preparing",
            "ProcessGroupNCCL preparing to dump debug info.", _fr_prepare),
    _anchor("fr_stack", _words("Stack trace of the failed collective"), "Stack",
            "Stack trace of the failed collective: ", _fr_stack),
    _anchor("fr_written", _words("Finished writing Flight Recorder debug info to"), "Recorder",
            "Finished writing Flight Recorder debug info to x", _fr_written),
    _anchor("watchdog_stuck", r"watchdog" + _S + r"got" + _S + r"stuck" + _S + r"for", "atchdog",
            "ProcessGroupNCCL's watchdog got stuck for 480 seconds", _watchdog_stuck),
    # TORCH_NCCL_DESYNC_DEBUG report (c10d/TraceUtils.h retrieveDesyncReport)
    _anchor("desync_timeout", _words("Timeout at collective") + r"\s{0,4}:", "collective",
            "[0] Timeout at collective: ALLREDUCE, #5", _desync_timeout),
    _anchor("desync_missing", _words("are the lagging ranks"), "lagging",
            "ranks [1] are the lagging ranks that caused this timeout", _desync_ranks("never joined any collective")),
    _anchor("desync_joined", r"joined" + _S + r"but" + _S + r"didn'?t" + _S + r"finish" + _S + r"collective",
            "collective", "[1] joined but didn't finish collective #5",
            _desync_ranks("joined but did not finish the collective")),
    _anchor("desync_finished", r"but" + _S + r"didn'?t" + _S + r"join" + _S + r"collective", "collective",
            "[2] finished collective #4, but didn't join collective #5",
            _desync_ranks("finished the previous collective but did not join this one")),
    _anchor("heartbeat", _words("Heartbeat monitor timed out"), "Heartbeat",
            "Heartbeat monitor timed out! Process will be terminated", _heartbeat),
    _anchor("mismatch", _words("Detected mismatch between collectives"), "ismatch",
            "Detected mismatch between collectives on ranks.", _fingerprint_mismatch),
    _anchor("nccl_mismatch", _words("Mismatched collective detected"), "ismatch",
            "NCCL WARN Mismatched collective detected, please check rank 3", _nccl_mismatch),
    _anchor("monitored", r"failed" + _S + r"to" + _S + r"pass" + _S + r"monitoredBarrier", "monitoredBarrier",
            "Rank 1 failed to pass monitoredBarrier in 2000 ms", _monitored_barrier),
    _anchor("monitored_timeout", _words("timed out in monitoredBarrier"), "monitoredBarrier",
            "Rank 1 timed out in monitoredBarrier after 2000 ms", _monitored_barrier),
    _anchor("gloo_timeout", r"Timed" + _S + r"out" + _S + r"waiting" + _S + r"\d{1,12}" + _S + r"ms" + _S
            + r"for" + _S + r"(?:recv|send)", "aiting",
            "Timed out waiting 2000ms for recv operation to complete", _gloo_timeout),
    _anchor("peer_closed", r"Connection" + _S + r"(?:closed|reset)" + _S + r"by" + _S + r"(?:remote" + _S + r")?peer",
            "Connection", "Connection closed by peer [127.0.0.1]:1", _peer_closed),
    _anchor("pair_closure", _words("Application timeout caused pair closure"), "closure",
            "Application timeout caused pair closure",
            _fixed(_K.PEER_CLOSED, _B.GLOO, "Application timeout caused pair closure (group dead after a timeout)")),
    _anchor("store_clients", r"Timed" + _S + r"out" + _S + r"after" + _S + r"\d{1,12}" + _S + r"seconds"
            + _S + r"waiting" + _S + r"for" + _S + r"(?:clients|workers)", "aiting",
            "Timed out after 601 seconds waiting for clients. 1/2 clients joined.", _store_clients),
    _anchor("socket_timeout", _words("Socket Timeout"), "imeout", "RuntimeError: Socket Timeout",
            _fixed(_K.STORE_TIMEOUT, _B.STORE, "Socket Timeout")),
    _anchor("client_socket", _words("client socket has timed out"), "socket",
            "The client socket has timed out after 600s while trying to connect to (h, 1).", _client_socket),
    _anchor("store_wait", r"wait" + _S + r"timeout" + _S + r"after" + _S + r"\d{1,12}" + _S + r"ms", "imeout",
            "wait timeout after 1800000ms, keys: x", _store_wait),
    _anchor("store_key", _words("Timeout waiting for key"), "aiting", "Timeout waiting for key: x",
            _fixed(_K.STORE_TIMEOUT, _B.STORE, "timeout waiting for key")),
    _anchor("rdzv_timeout", r"RendezvousTimeoutError", "Rendezvous", "RendezvousTimeoutError",
            _fixed(_K.STORE_TIMEOUT, _B.STORE, "rendezvous timeout")),
    _anchor("recv_zero", _words("Failed to recv, got 0 bytes"), "Failed", "Failed to recv, got 0 bytes",
            _fixed(_K.PEER_CLOSED, _B.STORE, "store: failed to recv, got 0 bytes")),
    _anchor("dl_timeout", _words("DataLoader timed out after"), "DataLoader", "DataLoader timed out after 5 seconds",
            _dataloader_timeout),
    _anchor("dl_worker", r"DataLoader" + _S + r"worker" + _S + r"\(" + _S + r"pid", "DataLoader",
            "DataLoader worker (pid 12) is killed by signal: Killed.", _dataloader_worker),
    _anchor("too_many_files", _words("Too many open files"), "files", "Too many open files",
            _open_files("Too many open files", always_dataloader=False)),
    _anchor("ancdata", _words("received 0 items of ancdata"), "ancdata", "received 0 items of ancdata",
            _open_files("received 0 items of ancdata", always_dataloader=True)),
    _anchor("nccl_error", r"NCCL" + _S + r"error" + _S + r"(?:in" + _S + r")?:", "error",
            "NCCL error in: x.cpp:1, unhandled system error, NCCL version 2", _nccl_error),
    _anchor("nccl_code", r"nccl(?:SystemError|UnhandledCudaError|RemoteError|InternalError|InvalidUsage"
            r"|InvalidArgument|InProgress)\b",
            ("ncclSystem", "ncclUnhandled", "ncclRemote", "ncclInternal", "ncclInvalid", "ncclInProgress"), "ncclRemoteError: A call failed", _nccl_code),
    _anchor("nccl_warn", r"NCCL" + _S + r"WARN\b", "WARN", "h:1:2 [0] NCCL WARN Net : Call to recv failed",
            _nccl_warn, generic=True),
    _anchor("duplicate_gpu", _words("Duplicate GPU detected"), "Duplicate",
            "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000", _duplicate_gpu),
    _anchor("cuda_error", r"CUDA" + _S + r"error" + _S + r":", "error",
            "CUDA error: an illegal memory access was encountered", _cuda_error),
    _anchor("cuda_oom", _words("CUDA out of memory"), "memory", "CUDA out of memory. Tried to allocate",
            _fixed(_K.CUDA_ERROR, _B.CUDA, "CUDA out of memory")),
    _anchor("cuda_failure", r"Cuda" + _S + r"failure", "failure", "Cuda failure 1 'invalid argument'", _cuda_failure),
    _anchor("unused", _words("Expected to have finished reduction in the prior iteration"), "reduction",
            "Expected to have finished reduction in the prior iteration before starting a new one.",
            _unused_parameters),
    _anchor("elastic_rank", r"rank\s{0,8}:\s{0,4}\d{1,7}\s{0,4}\(\s{0,4}local_rank", "local_rank",
            "  rank      : 1 (local_rank: 1)", _elastic_rank),
    _anchor("elastic_exit", r"exitcode\s{0,8}:\s{0,4}-?\d{1,5}", "exitcode", "  exitcode  : 1 (pid: 3957)",
            None, state=StateChange.EXITCODE),
    _anchor("elastic_failed", r"failed" + _S + r"\(" + _S + r"exitcode" + _S + r":", "exitcode",
            "failed (exitcode: 1) local_rank: 0 (pid: 3956) of binary: python", _elastic_failed),
    _anchor("root_cause", _words("Root Cause (first observed failure)"), "observed",
            "Root Cause (first observed failure):", None, state=StateChange.ROOT_CAUSE_NEXT),
    _anchor("spawn_process", r"--" + _S + r"Process" + _S + r"\d{1,7}" + _S + r"terminated" + _S + r"with",
            "erminat", "-- Process 3 terminated with the following error:", _spawn_process),
    # failures before training starts: rendezvous, store, connection set-up
    _anchor("store_barrier", _words("Timed out initializing process group in store based barrier"), "initializing",
            "Timed out initializing process group in store based barrier on rank 7, for key: store_based_barrier_key:1 "
            "(world_size=8, num_workers_joined=4, timeout=0:00:30 error=x)", _store_barrier(waiting=False), span=500),
    _anchor("store_barrier_wait", _words("Waiting in store based barrier to initialize process group"), "aiting",
            "Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
            "(world_size=2, worker_count=1, timeout=0:30:00)", _store_barrier(waiting=True), span=500),
    _anchor("unique_id", _words("retrieving ncclUniqueId from"), "ncclUniqueId",
            "[3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by "
            "key '0', but store->get('0') got error: Socket Timeout", _unique_id, span=400),
    _anchor("store_flag", r"Failed" + _S + r"to" + _S + r"check" + _S + r"the" + _S + r'"?should' + _S + r'dump"?'
            + _S + r"flag", "should",
            'Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), '
            "with error: Broken pipe", _store_flag, span=300),
    _anchor("store_flag_old", _words("dump flag from the global store"), "global",
            "Failed to get exception dump flag from the global store.Connection reset by peer", _store_flag, span=120),
    _anchor("client_connect", _words("client socket has failed to connect to"), "socket",
            "The client socket has failed to connect to any network address of (node1, 29500).",
            _connect_failed(Backend.STORE, "store client could not connect"), span=200),
    _anchor("full_mesh", _words("Gloo connectFullMesh failed with"), "connectFullMesh",
            "Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
            _connect_failed(Backend.GLOO, "gloo could not connect the group"), span=300),
    _anchor("refused", _words("Connection refused"), "refused",
            "connect [127.0.1.1]:29500: Connection refused", _connect_failed(None, ""), generic=True),
    _anchor("gloo_interface", _words("Unable to find address for"), "address",
            "ifa != nullptr. Unable to find address for: eth0", _gloo_interface),
    _anchor("rdzv_connection", r"RendezvousConnectionError", "Rendezvous", "RendezvousConnectionError",
            _connect_failed(Backend.STORE, "rendezvous: could not reach the rendezvous backend"), span=200),
    _anchor("terminating", _words("Terminating the process after attempting to dump debug info"), "erminat",
            "Terminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
            _terminating),
    _anchor("dl_bus_error", _words("Unexpected bus error encountered in worker"), "encountered",
            "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory",
            _worker_signal("bus error in a DataLoader worker: shared memory (/dev/shm) too small")),
    _anchor("dl_segfault", _words("Unexpected segmentation fault encountered in worker"), "encountered",
            "ERROR: Unexpected segmentation fault encountered in worker.",
            _worker_signal("segmentation fault in a DataLoader worker")),
)
del _K, _B

#: anchor name -> anchor
_BY_NAME: dict[str, Anchor] = {a.name: a for a in ANCHORS}
#: every anchor in one alternation (documentation and tests; matching runs one anchor at a time)
_ANCHOR_RE = re.compile("|".join(f"(?P<{a.name}>{a.pattern})" for a in ANCHORS))
#: a record is matched only if it contains one of these
_KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(k for a in ANCHORS for k in a.keywords))
#: keyword -> (position in ANCHORS, anchor, its compiled pattern) of the anchors it may announce
_BY_KEYWORD: dict[str, tuple[tuple[int, Anchor, re.Pattern[str]], ...]] = {
    k: tuple((i, a, re.compile(a.pattern)) for i, a in enumerate(ANCHORS) if k in a.keywords) for k in _KEYWORDS
}
#: a block of records none of which contains one of these can be skipped as a whole
#: (a traceback's frames are read inside such blocks only: its start and the exception that ends it
#: are keywords, and the frames next to that exception are the ones that say where the rank was)
_LOOK_KEYWORDS: tuple[str, ...] = _KEYWORDS + ("distributed", "backward(", "Error", "Exception", "most recent call",
                                               "KeyboardInterrupt")
_BLOCK_RECORDS = 64


def _may_match(text: str, keywords: tuple[str, ...] = _KEYWORDS) -> bool:
    """The prefilter's rule for one text: it can hold an anchor only if it holds a keyword
    (:func:`read_log` applies it to a block of records at a time; the tests to each example)."""
    for keyword in keywords:
        if keyword in text:
            return True
    return False


def _is_source_code(head: str, body: str) -> bool:
    """A traceback quoting the code that raises (``raise RuntimeError('DataLoader timed out after
    {} seconds'...)``) or a format string is not the message itself."""
    near = body[:100]
    return "raise " in head[-120:] or "{}" in near or "%s" in near or "%d" in near or "{0}" in near


# a generic anchor is dropped when a more specific one follows within this many characters
_SPECIFIC_AFTER = 240


def _exception_event(record: Record) -> _Fields | None:
    """A Python exception line with no other recognised message in it."""
    m = _EXCEPTION_LINE.search(record.text[:4000])
    if m is None:
        return None
    qualified, message = m.group(1), " ".join(m.group(2).split())
    short = qualified.rsplit(".", 1)[-1]
    if short == "SignalException":
        return {"kind": EventKind.INTERRUPTED, "backend": Backend.PROCESS, "detail": f"{short}: {message}"[:200],
                "_offset": m.start(1)}
    if short in _LAUNCHER_EXCEPTIONS:
        return None
    if short == "DistBackendError":
        return {"kind": EventKind.NCCL_ERROR, "backend": Backend.NCCL, "detail": f"{short}: {message}"[:200]}
    if short in ("DistNetworkError", "DistStoreError"):
        return {"kind": EventKind.PEER_CLOSED, "backend": Backend.STORE, "detail": f"{short}: {message}"[:200]}
    return {"kind": EventKind.PYTHON_EXCEPTION, "backend": Backend.PROCESS, "detail": f"{short}: {message}"[:200],
            "_offset": m.start(1)}


def _make_event(fields: _Fields, head: _Head, record: Record, offset: int, ctx_rank: int | None,
                state: _State) -> Event:
    line_no = record.line_no_at(offset)
    group_rank = fields.pop("group_rank", None)
    if group_rank is None:
        group_rank = head.group_rank
    local_rank = fields.pop("local_rank", None)
    if local_rank is None:
        local_rank = head.local_rank
    # global rank: explicit in the message (launcher summary) > [rankN]:/mpirun prefix >
    # mp.spawn context > in-message rank (rank within the group) > launcher local rank
    rank = fields.pop("rank", None)
    for candidate in (head.rank, ctx_rank, group_rank, local_rank):
        if rank is None:
            rank = candidate
    kind = fields["kind"]
    if fields.get("op_type") is None and kind in _OP_FROM_CONTEXT:
        fields["op_type"] = _frame_op(state, rank, line_no)
    fields.pop("_offset", None)
    if kind in _SITE_FROM_STACK:
        site = _site_of(state, rank, line_no)
        if site is not None:
            fields["site_kind"], fields["site"] = site
    pg_id = fields.pop("pg_id", None)
    values = dict(_EVENT_DEFAULTS)
    values.update(fields)
    values.update(
        rank=rank,
        group_rank=group_rank,
        local_rank=local_rank,
        pg_id=pg_id if pg_id is not None else head.pg_id,
        pg_name=head.pg_name,
        timestamp=head.timestamp,
        line=_cut_line(record.text, offset),
        line_no=line_no,
    )
    if len(values) != len(_EVENT_DEFAULTS):
        raise TypeError(f"unknown Event field(s) {sorted(set(values) - set(_EVENT_DEFAULTS))}")
    # The parser makes hundreds of thousands of events from a big log: filling the instance's
    # __dict__ at once is ~5x faster than the frozen dataclass __init__ (26 object.__setattr__ calls),
    # with the same names and values; the instance stays frozen.
    event = object.__new__(Event)
    event.__dict__.update(values)
    return event


#: every Event field with its default (backend and kind have none: each handler sets them)
_EVENT_DEFAULTS: dict[str, object] = {
    f.name: (f.default if f.default is not MISSING else None) for f in dataclass_fields(Event)
}


#: events that end a Python traceback: where the rank was is read from its frames
_SITE_FROM_STACK = frozenset(
    {
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.PEER_CLOSED,
        EventKind.PYTHON_EXCEPTION,
        EventKind.NCCL_ERROR,
        EventKind.DATALOADER_TIMEOUT,
        EventKind.INTERRUPTED,
    }
)
_OP_FROM_CONTEXT = frozenset(
    {
        EventKind.COLLECTIVE_TIMEOUT,
        EventKind.PEER_CLOSED,
        EventKind.PYTHON_EXCEPTION,
        EventKind.NCCL_ERROR,
        EventKind.COLLECTIVE_MISMATCH,
    }
)


def _candidates(text: str, keywords: tuple[str, ...], present: bool = False) -> dict[int, tuple[Anchor, re.Pattern[str]]]:
    """The anchors announced by a keyword that ``text`` contains, by position in ANCHORS
    (``present``: the keywords are known to be in the text)."""
    candidates: dict[int, tuple[Anchor, re.Pattern[str]]] = {}
    for keyword in keywords:
        anchors = _BY_KEYWORD.get(keyword)
        if anchors and (present or keyword in text):
            for index, anchor, pattern in anchors:
                candidates[index] = (anchor, pattern)
    return candidates


def _leftmost(found: list[tuple[int, int, int, Anchor]]) -> list[tuple[Anchor, int, int]]:
    """(start, anchor index, end, anchor) of one record -> the matches the alternation would make:
    leftmost first, the earlier anchor on a tie, no overlaps, at most ``MAX_EVENTS_PER_RECORD``."""
    found.sort(key=lambda item: (item[0], item[1]))
    matches: list[tuple[Anchor, int, int]] = []
    end = -1
    for start, _index, stop, anchor in found:
        if start < end:
            continue
        matches.append((anchor, start, stop))
        end = stop if stop > start else start + 1
        if len(matches) >= MAX_EVENTS_PER_RECORD:
            break
    return matches


def _find_anchors(text: str, keywords: tuple[str, ...] = _KEYWORDS) -> list[tuple[Anchor, int, int]]:
    """Every anchor match in ``text`` (at most ``MAX_EVENTS_PER_RECORD``): (anchor, start, end).

    The same matches as ``_ANCHOR_RE.finditer`` (leftmost first, the earlier anchor on a tie, no
    overlaps), but only the anchors whose keyword is in the text are run, each on its own: one
    pattern that starts with a literal is searched far faster than the alternation of all of them.
    """
    found: list[tuple[int, int, int, Anchor]] = []
    for index, (anchor, pattern) in _candidates(text, keywords).items():
        for m in pattern.finditer(text):
            found.append((m.start(), index, m.end(), anchor))
            if len(found) >= 4 * MAX_EVENTS_PER_RECORD:
                break
    return _leftmost(found) if found else []


def _find_block_anchors(texts: list[str], joined: str, keywords: tuple[str, ...]) -> list[list[tuple[Anchor, int, int]]]:
    """:func:`_find_anchors` of every record of a block at once: each candidate anchor searched
    once over the block (``joined`` with NULs, which no anchor can match across)."""
    starts: list[int] = []
    offset = 0
    for text in texts:
        starts.append(offset)
        offset += len(text) + 1
    found: list[list[tuple[int, int, int, Anchor]]] = [[] for _ in texts]
    for index, (anchor, pattern) in _candidates(joined, keywords, present=True).items():
        for m in pattern.finditer(joined):
            at = m.start()
            r = bisect_right(starts, at) - 1
            record_found = found[r]
            if len(record_found) < 4 * MAX_EVENTS_PER_RECORD:
                record_found.append((at - starts[r], index, m.end() - starts[r], anchor))
    return [_leftmost(f) if f else [] for f in found]


def _change_state(anchor: Anchor, state: _State, events: list[Event], text: str, start: int, line_no: int) -> None:
    """Apply a state-only anchor (see :class:`StateChange`)."""
    if anchor.state is StateChange.ROOT_CAUSE_NEXT:
        state.root_cause_pending = True
        return
    last = events[-1] if events else None
    if last is None or last.kind is not EventKind.PROCESS_EXIT or line_no - last.line_no > 3:
        return
    m = _ELASTIC_EXIT.search(text[start:start + 120])
    if m is not None and "exitcode" not in last.detail:
        sig = f" ({m.group(2)})" if m.group(2) else ""
        events[-1] = replace(last, detail=f"{last.detail}, exitcode {m.group(1)}{sig}")


def _shadowed(index: int, matches: list[tuple[Anchor, int, int]]) -> bool:
    """A generic anchor (``NCCL WARN``) followed closely by a specific one makes no event."""
    anchor, start, _ = matches[index]
    return anchor.generic and any(
        later_start - start <= _SPECIFIC_AFTER and not later.generic and later.handle is not None
        for later, later_start, _ in matches[index + 1:index + 4]
    )


def _head_for(head_text: str, record_head: Callable[[], _Head]) -> _Head:
    """Prefixes just before a match, completed from the start of its record (read only if needed)."""
    head = _read_head(head_text)
    if head.rank is not None and head.timestamp is not None and (head.pg_id is not None or head.group_rank is not None):
        return head
    whole = record_head()
    rank, local = (head.rank, head.local_rank) if head.rank is not None or head.local_rank is not None else (
        whole.rank, whole.local_rank)
    pg_id, pg_name, group = head.pg_id, head.pg_name, head.group_rank
    if pg_id is None and whole.pg_id is not None and group is None:
        pg_id, pg_name, group = whole.pg_id, whole.pg_name, whole.group_rank
    return _Head(rank, local, group, pg_id, pg_name, head.timestamp or whole.timestamp)


def _exception_only(record: Record, state: _State, events: list[Event], ctx_rank: int | None) -> None:
    """A record with no anchor: a Python exception line, if it holds one."""
    if "KeyboardInterrupt" in record.text and _INTERRUPT.search(record.text):
        fields: _Fields | None = {"kind": EventKind.INTERRUPTED, "backend": Backend.PROCESS,
                                  "detail": "KeyboardInterrupt (stopped by SIGINT, e.g. Ctrl-C)",
                                  "_offset": record.text.find("KeyboardInterrupt")}
        events.append(_make_event(fields, _read_head(record.text[:300]), record, fields["_offset"], ctx_rank, state))
        return
    if _EXCEPTION_HINT.search(record.text) is None:
        return
    fields = _exception_event(record)
    if fields is not None:
        offset = int(fields.get("_offset", 0))  # type: ignore[call-overload]
        events.append(_make_event(fields, _read_head(record.text[:300]), record, offset, ctx_rank, state))


def _events_in_record(record: Record, state: _State, events: list[Event],
                      matches: list[tuple[Anchor, int, int]] | None = None) -> None:
    """Append the events of one record to ``events`` (whose last item is the event before).
    ``matches``: its anchor matches when already found (:func:`_find_block_anchors`)."""
    text = record.text
    line_no = record.line_no
    ctx_rank = None
    if state.spawn_rank is not None and line_no <= state.spawn_rank[1]:
        ctx_rank = state.spawn_rank[0]
    prefix = _RANK_PREFIX.search(text, 0, 300) if text.find("[rank", 0, 300) >= 0 else None
    if prefix is not None:
        state.prefix_rank = (int(prefix.group(1)), line_no)
    if "distributed" in text or "backward(" in text:
        _update_frames(state, text, int(prefix.group(1)) if prefix else ctx_rank, line_no)
    if 'File "' in text or "most recent call" in text:
        _update_stack(state, text, int(prefix.group(1)) if prefix else ctx_rank, line_no)
    if matches is None:
        matches = _find_anchors(text)
    if not matches:
        _exception_only(record, state, events, ctx_rank)
        return
    cached: list[_Head] = []

    def record_head() -> _Head:
        if not cached:
            cached.append(_read_head(text[:300]))
        return cached[0]

    prev_end = 0
    covered_until = -1  # inside the span of the message before: no event of its own
    for index, (anchor, start, end) in enumerate(matches):
        if anchor.handle is None:
            _change_state(anchor, state, events, text, start, line_no)
            prev_end = end
            continue
        if start < covered_until or _shadowed(index, matches):
            continue
        head_text = text[max(prev_end, start - _HEAD_CHARS):start]
        body = text[start:start + _BODY_CHARS]
        prev_end = end
        if _is_source_code(head_text, body):
            continue
        fields = anchor.handle(head_text, body)
        if fields is None:
            continue
        head = _head_for(head_text, record_head)
        if anchor.name == "elastic_rank" and state.root_cause_pending:
            fields["detail"] = "launcher: root cause (first observed failure)"
            state.root_cause_pending = False
        if (fields["kind"] is EventKind.DESYNC_REPORT and head.rank is None and state.prefix_rank is not None
                and line_no - state.prefix_rank[1] <= 12):
            head = head._replace(rank=state.prefix_rank[0])  # continuation line of a multi-line LOG(ERROR)
        events.append(_make_event(fields, head, record, start, ctx_rank, state))
        covered_until = start + anchor.span
        if anchor.name == "spawn_process" and events[-1].rank is not None:
            state.spawn_rank = (events[-1].rank, events[-1].line_no + _CONTEXT_LINES)


# --------------------------------------------------------------------------------------------
# merging follow-up lines of one error into one event
# --------------------------------------------------------------------------------------------

_MERGE_PRECEDENCE = {
    EventKind.DUPLICATE_GPU: 4,
    EventKind.CUDA_ERROR: 3,
    EventKind.NCCL_ERROR: 2,
    EventKind.PEER_CLOSED: 1,
}
_MERGE_LINES = 4


def _mergeable(prev: Event, event: Event) -> bool:
    return (
        prev.kind in _MERGE_PRECEDENCE
        and event.kind in _MERGE_PRECEDENCE
        and prev.kind is not EventKind.PEER_CLOSED
        and event.line_no - prev.line_no <= _MERGE_LINES
        and (event.rank is None or prev.rank is None or event.rank == prev.rank)
        and not (prev.kind is EventKind.DUPLICATE_GPU and event.kind is EventKind.DUPLICATE_GPU)
    )


def _merged(prev: Event, event: Event) -> Event:
    """``NCCL error in: … / ncclSystemError: … / Last error: … / Cuda failure …`` -> one event."""
    winner, other = (event, prev) if _MERGE_PRECEDENCE[event.kind] > _MERGE_PRECEDENCE[prev.kind] else (prev, event)
    detail = "; ".join(d for d in dict.fromkeys((prev.detail, event.detail)) if d)
    return replace(
        winner,
        backend=prev.backend if prev.backend is not Backend.UNKNOWN else event.backend,
        rank=prev.rank if prev.rank is not None else event.rank,
        line=prev.line,
        line_no=prev.line_no,
        detail=detail[:300],
        seq_num=winner.seq_num if winner.seq_num is not None else other.seq_num,
        op_type=winner.op_type or other.op_type,
        numel_in=winner.numel_in if winner.numel_in is not None else other.numel_in,
        numel_out=winner.numel_out if winner.numel_out is not None else other.numel_out,
        timeout_ms=winner.timeout_ms if winner.timeout_ms is not None else other.timeout_ms,
        named_ranks=winner.named_ranks or other.named_ranks,
        group_rank=winner.group_rank if winner.group_rank is not None else other.group_rank,
        timestamp=prev.timestamp or event.timestamp,
    )


class _Sink:
    """Where finished events go: merged with the one before when they continue it, counted, and
    kept while under the cap."""

    def __init__(self, max_events: int) -> None:
        self.kept: list[Event] = []
        self.max_events = max_events
        self.tally = TallyBuilder()
        self.pending: Event | None = None

    def add(self, event: Event) -> None:
        if self.pending is not None and _mergeable(self.pending, event):
            self.pending = _merged(self.pending, event)
            return
        self.finish()
        self.pending = event

    def finish(self) -> None:
        event, self.pending = self.pending, None
        if event is None:
            return
        keep = len(self.kept) < self.max_events
        if keep:
            self.kept.append(event)
        self.tally.add(event, kept=keep)


@dataclass(frozen=True)
class ParsedLog:
    """A parsed log: the first ``max_events`` events, and counts over all of them."""

    events: tuple[Event, ...]
    tally: LogTally


#: the log is read in pieces of about this many bytes (so its decoded text is never whole in memory)
_PIECE_BYTES = 4 * 2**20


def _raw_pieces(data: bytes | bytearray | memoryview | str) -> Iterator[bytes | str]:
    """The log in pieces of about ``_PIECE_BYTES`` that end at a line break (before a line that
    starts with ``[`` when there is one near: a wrapped record is then not cut), not yet normalised."""
    if not isinstance(data, (bytes, bytearray, memoryview, str)):
        normalize_text(data)  # raises the TypeError that says what was expected
    if isinstance(data, memoryview):
        data = data.cast("B")
    newline, bracket = ("\n", "\n[") if isinstance(data, str) else (b"\n", b"\n[")
    size = len(data)
    start = 0
    while start < size:
        end = start + _PIECE_BYTES
        if end >= size:
            end = size
        else:
            near = bytes(data[end:end + 64 * 1024]) if isinstance(data, memoryview) else data[end:end + 64 * 1024]
            cut = near.find(bracket)  # type: ignore[arg-type]
            if cut < 0:
                cut = near.find(newline)  # type: ignore[arg-type]
            end = size if cut < 0 else end + cut + 1
        yield data[start:end] if isinstance(data, str) else bytes(data[start:end])
        start = end


try:  # google-re2: all the keywords in one linear pass (Python's re tries every alternative at every byte)
    import re2 as _re2
except ImportError:  # pragma: no cover - without its wheel every line is read, as before
    _re2 = None

#: the keywords as one pattern over a piece's normalised bytes: what lies far from all of them is skipped
_KEYWORD_SCAN = _re2.compile("|".join(re.escape(k) for k in _LOOK_KEYWORDS).encode()) if _re2 is not None else None
#: lines read before and after the record that holds a keyword (a rank prefix above it, a follow-up line)
_AROUND_LINES = 3
#: at most this many physical lines of one wrapped record are followed from a keyword
_MAX_WRAP_LINES = 48
#: once the windows cover this share of what was scanned of a piece (after an eighth of it), the rest
#: of the piece is read whole: an error log is keywords on almost every line
_DENSE = 0.7


def _is_continuation(b: bytes, line_start: int) -> bool:
    """The physical line at ``line_start`` continues the record of the line above (see
    :func:`iter_records`): the line above is long enough to have been wrapped, and this one does not
    start a record."""
    if line_start == 0:
        return False
    above = b.rfind(b"\n", 0, line_start - 1) + 1
    if line_start - 1 - above < _WRAP_MIN_CHARS:
        return False
    end = b.find(b"\n", line_start, line_start + 200)
    head = b[line_start:end if end >= 0 else line_start + 200].decode("utf-8", errors="replace")
    return bool(head.strip()) and _RECORD_START.match(head) is None


def _window_around(b: bytes, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` of the lines to read for a keyword at ``b[start:end]``: its whole record (a
    wrapped one followed back and forward) and ``_AROUND_LINES`` lines on each side."""
    first = b.rfind(b"\n", 0, start) + 1
    for _ in range(_MAX_WRAP_LINES):
        if not _is_continuation(b, first):
            break
        first = b.rfind(b"\n", 0, first - 1) + 1
    for _ in range(_AROUND_LINES):
        if first == 0:
            break
        first = b.rfind(b"\n", 0, first - 1) + 1
    return first, _record_end(b, end, _AROUND_LINES)


def _record_end(b: bytes, at: int, extra_lines: int = 0) -> int:
    """The end (after its newline) of the record holding ``b[at]``, and ``extra_lines`` lines more."""
    n = len(b)
    last = b.find(b"\n", at)
    last = n if last < 0 else last + 1
    for _ in range(_MAX_WRAP_LINES):
        if last >= n or not _is_continuation(b, last):
            break
        nxt = b.find(b"\n", last)
        last = n if nxt < 0 else nxt + 1
    for _ in range(extra_lines):
        if last >= n:
            break
        nxt = b.find(b"\n", last)
        last = n if nxt < 0 else nxt + 1
    return last


_LINE_PREFIX = re.compile(rb"\[[^\]\n]{1,40}\]:?[ ]?")


def _traceback_end(b: bytes, at: int) -> int:
    """The end (after its newline) of the Python traceback whose header line holds ``b[at]``: its
    indented frame lines (after a ``[rank3]:`` prefix) up to the first line that is not, the
    exception, included. The frames between header and exception hold no keyword, and they say
    where the rank was."""
    n = len(b)
    pos = b.find(b"\n", at) + 1
    for _ in range(_STACK_LINES):
        if pos <= 0 or pos >= n:
            return n
        nl = b.find(b"\n", pos)
        nl = n if nl < 0 else nl
        line = b[pos:nl]
        prefix = _LINE_PREFIX.match(line)
        body = line[prefix.end():] if prefix else line
        if body[:1] not in (b" ", b"\t", b""):
            return min(n, nl + 1)
        pos = nl + 1
    return pos


def _windows(b: bytes) -> Iterator[tuple[int, int]]:
    """The parts of a piece's normalised bytes the parser reads, ``(start, end)`` at line boundaries,
    in order: the records around every keyword (see :func:`_window_around`). A quiet log is mostly
    what lies between them (NCCL INFO lines, progress bars), and is skipped unread."""
    assert _KEYWORD_SCAN is not None
    search, n = _KEYWORD_SCAN.search, len(b)
    pos, first, last, covered = 0, -1, -1, 0
    while pos < n:
        m = search(b, pos)
        if m is None:
            break
        start, end = _window_around(b, m.start(), m.end())
        if first >= 0 and start <= last:
            last = max(last, end)
        else:
            if first >= 0:
                covered += last - first
                yield first, last
            first, last = start, end
        # a traceback that starts in the window is read to its end; a keyword between m and ``last``
        # may sit in a record that goes on past it
        tb = b.find(b"most recent call", m.start(), last)
        while tb >= 0:
            last = max(last, _traceback_end(b, tb))
            tb = b.find(b"most recent call", tb + 1, last)
        last = _record_end(b, last - 1)
        pos = last
        if pos > n // 8 and covered + last - first > _DENSE * pos:
            last = n  # dense: read the rest whole
            break
    if first >= 0:
        yield first, last


def _regions(data: bytes | bytearray | memoryview | str) -> Iterator[tuple[str, int]]:
    """The parts of the log the parser reads, as (normalised text, number of its first line), in
    order. Bytes are scanned for keywords first (``_KEYWORD_SCAN``) and only the records around them
    are decoded and split; text, bytes with ANSI escapes, or no google-re2: every line."""
    line = 1
    for raw in _raw_pieces(data):
        if _KEYWORD_SCAN is None or isinstance(raw, str) or b"\x1b" in raw:
            text = normalize_text(raw)
            yield text, line
            line += text.count("\n")
            continue
        norm = raw.replace(b"\r\n", b"\n").translate(None, _CONTROL_BYTES)
        done = 0  # the newlines before ``done`` are counted in ``line``
        for start, end in _windows(norm):
            line += norm.count(b"\n", done, start)
            yield norm[start:end].decode("utf-8", errors="replace"), line
            line += norm.count(b"\n", start, end)
            done = end
        line += norm.count(b"\n", done)


def read_log(data: bytes | bytearray | memoryview | str, *, max_events: int = MAX_EVENTS) -> ParsedLog:
    """Any log bytes or text -> :class:`ParsedLog`. Never raises on bad data.

    Every event is counted (:class:`LogTally`); the first ``max_events`` are kept with their text.
    Memory grows with the kept events and the number of ranks, not with the log: it is decoded and
    matched in pieces of a few MiB. Of bytes, only the records around a keyword are decoded and read
    (:func:`_regions`); what lies between them cannot hold a message, and is skipped.
    """
    state = _State(frames={})
    window: list[Event] = []
    sink = _Sink(max_events)
    block: list[Record] = []

    def flush() -> None:
        texts = [r.text for r in block]
        joined = "\0".join(texts)
        keywords = tuple(k for k in _LOOK_KEYWORDS if k in joined)
        if keywords:
            for record, matches in zip(block, _find_block_anchors(texts, joined, keywords)):
                text = record.text
                # a record without an anchor only matters for the parser's context (rank prefix,
                # traceback frames) or as an exception line
                if matches or "[rank" in text or "distributed" in text or "backward(" in text or "Error" in text \
                        or "Exception" in text or 'File "' in text or "most recent call" in text \
                        or "KeyboardInterrupt" in text:
                    _events_in_record(record, state, window, matches)
            # the last event stays in the window: the next record may still complete it
            for event in window[:-1]:
                sink.add(event)
            del window[:-1]
        block.clear()

    for text, first_line in _regions(data):
        for record in iter_records(text, first_line=first_line):
            block.append(record)
            if len(block) >= _BLOCK_RECORDS:
                flush()
        flush()
    for event in window:
        sink.add(event)
    sink.finish()
    return ParsedLog(events=tuple(sink.kept), tally=sink.tally.build())


def parse_log(data: bytes | bytearray | memoryview | str, *, max_events: int = MAX_EVENTS) -> list[Event]:
    """Any log bytes or text -> recognised events, in log order. Never raises on bad data.

    At most ``max_events`` events are kept (the first ones), and at most
    ``MAX_EVENTS_PER_RECORD`` per logical record, so a pathological input cannot make the
    result itself unbounded; :func:`read_log` also counts the ones past the cap.

    >>> [e.kind.value for e in parse_log(b"[rank1]:[E1206 18:44:12.7 ProcessGroupNCCL.cpp:607] "
    ...     b"[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
    ...     b"OpType=BARRIER, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 "
    ...     b"milliseconds before timing out.")]
    ['collective_timeout']
    """
    return list(read_log(data, max_events=max_events).events)
