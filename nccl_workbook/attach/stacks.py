"""Where is each rank? py-spy dump text -> a classified place, and N ranks -> one verdict.

Pure functions, no processes: :func:`parse_dump` reads the text of ``py-spy dump --pid PID``
(best with ``--full-filenames``, with or without ``--native``), :func:`classify` says where the
main thread is, and :func:`verdict` groups the ranks and names the odd ones out.

The places, most specific first:

- ``collective``: inside a ``torch.distributed`` collective (an explicit ``dist.all_reduce``,
  ``barrier``, ``all_gather_object``…; the op from :mod:`nccl_workbook.ops`), or in
  ``loss.backward()`` of a DDP job, where the C++ reducer all-reduces the gradient buckets (a
  Python-only stack cannot tell that wait from backward compute; with ``--native`` frames, a
  ``c10d::`` frame under ``backward`` says it is the all-reduce, and its absence that it is compute).
- ``data``: in a DataLoader (``_next_data``) or a ``queue.get``.
- ``io``: saving/loading (``torch.save``/``torch.load``, ``shutil``, file writes in native frames).
- ``sleep``: ``time.sleep`` (seen only in ``--native`` frames: ``time_sleep``).
- ``blocked``: the thread is idle (py-spy's ``(idle)``) in the user's own code: a C call that
  waits (a sleep, a lock, I/O) that Python-only stacks do not name.
- ``compute``: anything else (the thread runs, or waits in library code that is none of the above).

The verdict: ranks that are *waiting* in a collective (in one, and not seen to make progress) form
groups by (op, call site); the largest is "the collective the job waits in", and every rank
elsewhere is an odd one out (a culprit): "ranks 0, 2, 3 in ALLREDUCE (DDP backward) at
train.py:310; rank 1 loading data in get_batch at train.py:118". No waiting rank: the job is making
progress. Every rank waiting in the same place: they all entered it and it does not complete.

Limits: only the main thread is classified (the one named ``MainThread``). On NCCL, collectives
are asynchronous: a rank's CPU thread usually waits later, at a CUDA synchronisation
(``loss.item()``), which is classified as compute; and blocking waits spin, so "no progress" is
judged from identical stacks there (see :mod:`nccl_workbook.attach.procs`).

Usage::

    dump = parse_dump(text)                    # PyDump: process, threads and frames
    place = classify(dump)                     # Place(state=State.COLLECTIVE, op='ALLREDUCE', ...)
    v = verdict([RankPlace(rank=0, place=place, ...), ...], world_size=4)
    v.message, v.culprit_ranks
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from nccl_workbook.ops import op_or_none

__all__ = ["State", "PyFrame", "PyThread", "PyDump", "Place", "RankPlace", "Group", "Verdict", "NOT_SEEN", "NOT_RUNNING",
           "parse_dump", "classify", "is_library_path", "group_ranks", "verdict", "format_ranks"]


class State(str, Enum):
    """Where a rank's main thread is."""

    COLLECTIVE = "collective"
    DATA = "data"
    IO = "io"
    SLEEP = "sleep"
    BLOCKED = "blocked"
    COMPUTE = "compute"
    #: no stack (py-spy failed, the process ended)
    UNKNOWN = "unknown"


#: how a state reads in the one-line message ("rank 1 loading data in f at x.py:3")
_STATE_WORDS: dict[State, str] = {
    State.COLLECTIVE: "in",
    State.DATA: "loading data",
    State.IO: "in I/O",
    State.SLEEP: "sleeping",
    State.BLOCKED: "blocked (sleep, lock or I/O)",
    State.COMPUTE: "computing",
    State.UNKNOWN: "unreadable",
}


@dataclass(frozen=True)
class PyFrame:
    """One frame of a py-spy dump. ``line`` is None for native frames without line info."""

    function: str
    path: str
    line: int | None

    @property
    def native(self) -> bool:
        """A C/C++ frame (``--native``): a shared object or an address, not a Python file."""
        return not (self.path.endswith((".py", ".pyw")) or self.path.startswith("<"))

    @property
    def short_name(self) -> str:
        """The function's own name, without its class (``Tensor.backward`` -> ``backward``)."""
        return self.function.rsplit(".", 1)[-1]

    @property
    def where(self) -> str:
        """``file.py:LINE`` (the file's base name)."""
        base = os.path.basename(self.path) or self.path
        return f"{base}:{self.line}" if self.line is not None else base


@dataclass(frozen=True)
class PyThread:
    """A thread of a dump; ``frames`` innermost first, as py-spy prints them."""

    ident: str
    status: str  # py-spy's "idle", "active", "active+gil", …
    name: str
    frames: tuple[PyFrame, ...]

    @property
    def idle(self) -> bool:
        return self.status.startswith("idle")


@dataclass(frozen=True)
class PyDump:
    """One ``py-spy dump`` of one process."""

    pid: int | None
    command: str
    threads: tuple[PyThread, ...]

    @property
    def script(self) -> str | None:
        """The script the process runs (first ``*.py`` argument of its command line), if any."""
        for arg in self.command.split():
            if arg.endswith(".py"):
                return arg
        return None

    def main_thread(self) -> PyThread | None:
        """The thread named MainThread, else the one whose id is the pid, else the first."""
        for t in self.threads:
            if t.name == "MainThread":
                return t
        for t in self.threads:
            if self.pid is not None and t.ident in (str(self.pid), hex(self.pid)):
                return t
        return self.threads[0] if self.threads else None


_PROCESS = re.compile(r"^Process (\d+): ?(.*)$")
_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?\s*$')
# "    func (path:line)" or "    func (lib.so)"; function names may hold parentheses (C++), the
# location is the last parenthesised group
_FRAME = re.compile(r"^\s+(.*?) \(([^()]*?)(?::(\d+))?\)\s*$")


def parse_dump(text: str) -> PyDump:
    """Parse the text of ``py-spy dump``. Lines that are not part of the format are skipped
    (a header such as ``Python v3.11.7 (...)``, blank lines)."""
    pid: int | None = None
    command = ""
    threads: list[PyThread] = []
    current: tuple[str, str, str] | None = None
    frames: list[PyFrame] = []

    def close() -> None:
        if current is not None:
            threads.append(PyThread(ident=current[0], status=current[1], name=current[2], frames=tuple(frames)))

    for line in text.splitlines():
        if m := _PROCESS.match(line):
            pid, command = int(m.group(1)), m.group(2).strip()
        elif m := _THREAD.match(line):
            close()
            current, frames = (m.group(1), m.group(2), m.group(3) or ""), []
        elif current is not None and (m := _FRAME.match(line)):
            frames.append(PyFrame(function=m.group(1), path=m.group(2),
                                  line=int(m.group(3)) if m.group(3) else None))
    close()
    return PyDump(pid=pid, command=command, threads=tuple(threads))


_STDLIB = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)?/")


def is_library_path(path: str, script: str | None = None) -> bool:
    """True for frames of installed packages (torch, numpy…), the standard library, and frozen
    modules; the process's own ``script`` is never a library, wherever it is installed.

    >>> is_library_path("/venv/lib/python3.11/site-packages/torch/_tensor.py")
    True
    >>> is_library_path("/home/me/train.py"), is_library_path("<frozen runpy>")
    (False, True)
    """
    if script and (path == script or path.endswith("/" + script.lstrip("./"))):
        return False
    if path.startswith("<"):
        return path != "<string>" and path != "<stdin>"
    return ("/site-packages/" in path or "/dist-packages/" in path or bool(_STDLIB.search(path))
            # py-spy without --full-filenames prints installed packages from their package folder
            or path.startswith(("torch/", "numpy/")))


@dataclass(frozen=True)
class Place:
    """Where a main thread is.

    ``op``: the collective in NCCL's spelling (``ALLREDUCE``…) when ``state`` is collective and
    the op is known. ``via``: how it was reached (``DDP backward``, ``all_gather_object``).
    ``function``/``frame``: the user's innermost frame (not a library's), ``TokenShards.read_block``
    and ``train.py:108``; ``callers``: the user's frames further out, innermost first, as
    ``function:line``.
    """

    state: State
    op: str | None = None
    via: str | None = None
    function: str | None = None
    frame: str | None = None
    callers: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str | None, str | None, str | None]:
        """What makes two ranks "in the same place"."""
        return (self.state.value, self.op, self.via, self.frame)

    def describe(self) -> str:
        """``in ALLREDUCE (DDP backward) at train.py:237`` / ``loading data in read_block at x.py:9 (< main:22)``"""
        if self.state is State.COLLECTIVE:
            op = self.op or "a collective"
            via = f" ({self.via})" if self.via and self.via.upper() != (self.op or "") else ""
            return f"in {op}{via}" + (f" at {self.frame}" if self.frame else "")
        if self.state is State.UNKNOWN:
            return "unreadable" + (f" ({self.via})" if self.via else "")
        text = _STATE_WORDS[self.state]
        if self.function:
            text += f" in {self.function}"
        if self.frame:
            text += f" at {self.frame}"
        if self.callers:
            text += f" (< {' < '.join(self.callers[:2])})"
        return text


# -- classification rules: each looks at the main thread's frames (innermost first) ------------

#: DataLoader internals and queue reads: the thread waits for data
_DATA_FUNCTIONS = {"_next_data", "_get_data", "_try_get_data"}
#: library files whose frames mean saving/loading
_IO_FILES = ("torch/serialization.py", "/shutil.py", "torch/distributed/checkpoint/")
#: native frames that mean file I/O or sleeping
_IO_NATIVE = {"write", "__libc_write", "read", "__libc_read", "fsync", "fdatasync", "pwrite64", "pread64"}
_SLEEP_NATIVE = {"time_sleep", "clock_nanosleep", "nanosleep", "__clock_nanosleep"}


def _in_torch(path: str, sub: str = "") -> bool:
    """A frame of ``torch/<sub>``, with full or shortened file names."""
    return f"/torch/{sub}" in "/" + path


def _collective(frames: Sequence[PyFrame]) -> tuple[str | None, str | None] | None:
    """(op, via) when the thread is inside a collective; None otherwise."""
    python = [f for f in frames if not f.native]
    explicit = [(f, op) for f in python
                if (op := op_or_none(f.short_name)) is not None
                and (_in_torch(f.path, "distributed/") or _in_torch(f.path, "nn/parallel/"))]
    if explicit:
        # the innermost gives the op; the outermost collective frame is what the user called
        return explicit[0][1], explicit[-1][0].short_name
    backward = [f for f in python if f.short_name == "backward"
                and (_in_torch(f.path, "_tensor.py") or _in_torch(f.path, "autograd/"))]
    if backward:
        native = [f for f in frames if f.native]
        if native and not any("c10d::" in f.function for f in native):
            return None  # native frames show the backward pass computing, not the reducer waiting
        return op_or_none("backward"), "DDP backward"
    # a wait in C++ on a Work (handle.wait() of an async op) is seen only in native frames
    if any("c10d::" in f.function and "wait" in f.function.lower() for f in frames if f.native):
        return None, "Work.wait"
    return None


def _data(frames: Sequence[PyFrame]) -> bool:
    for f in frames:
        if f.native:
            continue
        if f.short_name in _DATA_FUNCTIONS and _in_torch(f.path, "utils/data/"):
            return True
        if f.short_name == "get" and os.path.basename(f.path) in ("queues.py", "queue.py"):
            return True
    return False


def _io(frames: Sequence[PyFrame]) -> bool:
    return any((not f.native and any(s in f.path for s in _IO_FILES)) or (f.native and f.function in _IO_NATIVE)
               for f in frames)


def _sleep(frames: Sequence[PyFrame]) -> bool:
    return any(f.native and f.function in _SLEEP_NATIVE for f in frames[:4])


def _user_frames(frames: Sequence[PyFrame], script: str | None) -> list[PyFrame]:
    return [f for f in frames if not f.native and not is_library_path(f.path, script)]


def classify(dump: PyDump) -> Place:
    """Where the main thread of one dump is (see the module docstring for the rules)."""
    thread = dump.main_thread()
    if thread is None or not thread.frames:
        return Place(state=State.UNKNOWN, via="no Python thread in the dump")
    frames = thread.frames
    user = _user_frames(frames, dump.script)
    # the innermost user frame, skipping the module level when a function is there
    inner = user[0] if user else next((f for f in frames if not f.native), None)
    callers = tuple(f"{f.short_name}:{f.line}" for f in user[1:] if f.function != "<module>")
    function = inner.function if inner is not None else None
    frame = inner.where if inner is not None else None
    base = {"function": function, "frame": frame, "callers": callers}

    if (coll := _collective(frames)) is not None:
        op, via = coll
        return Place(state=State.COLLECTIVE, op=op, via=via, **base)
    if _data(frames):
        return Place(state=State.DATA, **base)
    if _io(frames):
        return Place(state=State.IO, **base)
    if _sleep(frames):
        return Place(state=State.SLEEP, **base)
    python = [f for f in frames if not f.native]
    if thread.idle and python and user and python[0] is user[0]:
        return Place(state=State.BLOCKED, **base)  # waiting in a C call made from user code
    return Place(state=State.COMPUTE, **base)


# -- grouping and the verdict -----------------------------------------------------------------


@dataclass(frozen=True)
class RankPlace:
    """One rank: where it is, and whether it was seen making progress.

    ``stuck``: True when the main thread did not move during the observation interval (no CPU
    time, no context switch; or the same stack twice), False when it moved, None when unknown
    (one snapshot).
    """

    rank: int
    place: Place
    pid: int | None = None
    host: str = ""
    stuck: bool | None = None
    stack: str = ""

    @property
    def waiting(self) -> bool:
        """In a collective and not seen to make progress."""
        return self.place.state is State.COLLECTIVE and self.stuck is not False


@dataclass(frozen=True)
class Group:
    """Ranks in the same place."""

    ranks: tuple[int, ...]
    place: Place
    waiting: bool

    def describe(self) -> str:
        return f"{format_ranks(self.ranks)} {self.place.describe()}"


@dataclass(frozen=True)
class Verdict:
    """Groups (largest first), the odd ranks out, and one line to act on."""

    groups: tuple[Group, ...]
    culprit_ranks: tuple[int, ...]
    message: str
    #: ranks of the world not seen (on other hosts, or gone)
    missing_ranks: tuple[int, ...] = field(default=())
    #: the group the job waits in, if any
    waiting_group: Group | None = None


def format_ranks(ranks: Iterable[int]) -> str:
    """``rank 1`` / ``ranks 0, 2, 3`` / ``ranks 0-5, 7`` (runs of 3 or more as ranges)."""
    rs = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{rs[i]}-{rs[j]}")
            i = j + 1
        else:
            parts.append(str(rs[i]))
            i += 1
    return ("rank " if len(rs) == 1 else "ranks ") + ", ".join(parts)


def group_ranks(ranks: Iterable[RankPlace]) -> tuple[Group, ...]:
    """Ranks grouped by place: waiting groups first, then by size (largest first), then by rank.
    A group is waiting when all its ranks are."""
    by_key: dict[tuple, list[RankPlace]] = {}
    for r in ranks:
        by_key.setdefault((r.place.key, r.waiting), []).append(r)
    groups = [Group(ranks=tuple(sorted(r.rank for r in rs)), place=rs[0].place, waiting=rs[0].waiting)
              for rs in by_key.values()]
    return tuple(sorted(groups, key=lambda g: (not g.waiting, -len(g.ranks), g.ranks)))


#: why ranks of the world may be absent from a report, by default
NOT_SEEN = "not seen on the hosts attached (run attach there and merge)"
#: ... when the whole job was started on the host attached to
NOT_RUNNING = "not running (exited or crashed?)"


def verdict(ranks: Sequence[RankPlace], world_size: int | None = None, *, missing_reason: str = NOT_SEEN) -> Verdict:
    """Group the ranks and name the odd ones out.

    - Some ranks wait in a collective: the largest waiting group is the collective the job waits
      in; every other rank is a culprit (it is elsewhere: computing, loading data, in another
      collective). Ranks of the world not seen are named as not seen; they are the culprits when
      every seen rank waits in the same place.
    - No rank waits: the job is making progress (no culprit).
    """
    groups = group_ranks(ranks)
    seen = {r.rank for r in ranks}
    missing = tuple(r for r in range(world_size or 0) if r not in seen)
    missing_text = f"; {format_ranks(missing)} {missing_reason}" if missing else ""
    if not ranks:
        return Verdict(groups=(), culprit_ranks=(), message="no rank processes", missing_ranks=missing)
    waiting = [g for g in groups if g.waiting]
    if not waiting:
        where = "; ".join(g.describe() for g in groups[:4]) + ("; …" if len(groups) > 4 else "")
        return Verdict(groups=groups, culprit_ranks=(), missing_ranks=missing,
                       message=f"no rank is stuck in a collective: the job is making progress (just now: {where})"
                               f"{missing_text}")
    main = waiting[0]
    tie = len(waiting) > 1 and len(waiting[1].ranks) == len(main.ranks)
    others = [g for g in groups if g is not main]
    if tie:
        text = "; ".join(g.describe() for g in groups)
        return Verdict(groups=groups, culprit_ranks=(), missing_ranks=missing, waiting_group=None,
                       message=f"ranks wait in different collectives, in groups of the same size: {text}"
                               f"{missing_text}")
    if not others:
        if missing:
            return Verdict(groups=groups, culprit_ranks=missing, missing_ranks=missing, waiting_group=main,
                           message=f"{main.describe()}; {format_ranks(missing)} {missing_reason}: the ones the "
                                   "others wait for")
        return Verdict(groups=groups, culprit_ranks=(), missing_ranks=missing, waiting_group=main,
                       message=f"all {len(main.ranks)} ranks {main.place.describe()}: every rank entered it and it "
                               f"does not complete (transport/network, or a collective of another process group)")
    culprits = tuple(sorted(r for g in others for r in g.ranks))
    text = "; ".join([main.describe()] + [g.describe() for g in others])
    return Verdict(groups=groups, culprit_ranks=culprits, missing_ranks=missing, waiting_group=main,
                   message=text + missing_text)
