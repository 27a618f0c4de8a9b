"""Check an environment and training settings for what the incidents got wrong.

Every check below was verified against torch 2.13's own source and binaries (the headers under
``torch/include/torch/csrc/distributed/c10d/``, ``strings libtorch_cpu.so``, the Python package):

- ``NCCL_TIMEOUT`` is read by nobody: no string ``NCCL_TIMEOUT`` exists in torch's libraries or
  Python code, and NCCL itself has no timeout variable. The timeout is
  ``init_process_group(timeout=)`` / ``new_group(timeout=)``. (A script may read its own variable,
  like seed 000's ``NCCL_TIMEOUT_MINUTES``, and pass it on: that works because the script reads it.)
- ``NCCL_ASYNC_ERROR_HANDLING``, ``NCCL_BLOCKING_WAIT``, ``NCCL_DESYNC_DEBUG`` (and
  ``NCCL_ENABLE_TIMING``) are deprecated aliases: ``ProcessGroupNCCL.hpp`` lists each after its
  ``TORCH_NCCL_*`` name, and ``getCvar*`` (``c10d/Utils.hpp``) still honours the old name with the
  warning "Environment variable NCCL_… is deprecated; use TORCH_NCCL_… instead"; when both are
  set, the ``TORCH_NCCL_*`` value wins.
- The flight recorder is on by default in 2.13 (``TORCH_FR_BUFFER_SIZE``, default 2000 entries,
  older name ``TORCH_NCCL_TRACE_BUFFER_SIZE``, in ``FlightRecorder.hpp``); 0 turns it off. Dumps go
  to ``TORCH_FR_DUMP_TEMP_FILE`` (older ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``) on timeout
  (``TORCH_NCCL_DUMP_ON_TIMEOUT``).
- ``TORCH_NCCL_ENABLE_MONITORING`` / ``TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC`` control the heartbeat
  monitor that aborts a process whose watchdog is stuck.
- Measured on one NVIDIA H200 with torch 2.11 (``tests/gpu``, kept in ``tests/data/logs/nccl_gpu``):
  ``TORCH_NCCL_BLOCKING_WAIT=1`` makes only ``work.wait()`` of an ``async_op=True`` collective raise;
  a synchronous collective returns at once as without it, and the watchdog no longer handles
  timeouts, so a hang there is reported by nobody. Out of the box the watchdog ends the process
  about 60 s after the timeout line (4 x ``TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC``, default 15 000).

The knowledge is kept as tables another module can import (the code linter's
``noop-timeout-setting`` rule reads them): :data:`NOOP_SETTINGS` (settings that do nothing, with why
and what to use; environment variables and Python attributes such as
``torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT``), :data:`DEPRECATED_ALIASES`,
:data:`SCRIPT_VARIABLE_PREFIXES`, :data:`DISABLED_TRANSPORTS`. The checks are small functions in
:data:`CHECKS`, each over the environment and the training settings.

Known limits: the checks read variables and numbers; they cannot see what a script does in code
(``torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT = ...`` does not exist in 2.13 and
changes nothing: only ``init_process_group(timeout=)`` counts; the linter reads code). The
open-file estimate is a rough rule of thumb, said as such.

Usage::

    from nccl_workbook.doctor import TrainingSettings, check
    for finding in check(env={"NCCL_TIMEOUT": "3600"},
                         settings=TrainingSettings(pg_timeout_s=600, dataloader_timeout_s=600)):
        print(finding.severity.value, finding.what)
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Severity",
    "DoctorFinding",
    "TrainingSettings",
    "check",
    "render_text",
    "CHECKS",
    "DEPRECATED_ALIASES",
    "ASYNC_ERROR_HANDLING_OFF_WHY",
    "DISABLED_TRANSPORTS",
    "NOOP_SETTINGS",
    "SCRIPT_VARIABLE_PREFIXES",
    "noop_setting",
]


class Severity(str, enum.Enum):
    """How much a finding matters."""

    #: a setting that does nothing, or that will make a failure worse
    ERROR = "error"
    #: likely to cost time (slow runs, a wrong diagnosis) or to surprise
    WARNING = "warning"
    #: worth knowing, nothing wrong
    INFO = "info"


@dataclass(frozen=True)
class DoctorFinding:
    """One check that fired: what is set, why it matters, and the fix."""

    check: str
    severity: Severity
    what: str
    why: str
    fix: str
    #: the environment variable or setting it is about
    subject: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity.value, "what": self.what, "why": self.why,
                "fix": self.fix, "subject": self.subject}


@dataclass(frozen=True)
class TrainingSettings:
    """The training settings the checks compare (``None``: not known, the check is skipped)."""

    #: ``init_process_group(timeout=)`` in seconds (torch's default: 600 for NCCL, 1800 for gloo)
    pg_timeout_s: float | None = None
    #: ``DataLoader(timeout=)`` in seconds (0 = wait forever, torch's default)
    dataloader_timeout_s: float | None = None
    #: DataLoader workers per rank (sum over the loaders that are alive at once)
    workers_per_rank: int | None = None
    #: ranks (processes) on one host
    ranks_per_host: int | None = None
    #: the soft RLIMIT_NOFILE of the rank processes (``ulimit -n``)
    open_file_limit: int | None = None
    #: batches prefetched per worker (``prefetch_factor``, default 2)
    prefetch_factor: int = 2
    #: tensors in one batch (inputs, labels, masks, ...)
    tensors_per_batch: int = 4
    #: True while chasing a failure: then missing debug settings are reported
    debugging: bool = False
    #: "nccl" or "gloo" when known
    backend: str | None = None

    def __post_init__(self) -> None:
        for name in ("pg_timeout_s", "dataloader_timeout_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {value}")
        for name in ("workers_per_rank", "ranks_per_host", "open_file_limit"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    @classmethod
    def from_process(cls, **overrides: Any) -> TrainingSettings:
        """Settings with the open-file limit of this process filled in (other fields from
        ``overrides``)."""
        limit: int | None = None
        try:
            import resource

            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            limit = None if soft == resource.RLIM_INFINITY else int(soft)
        except (ImportError, OSError, ValueError):  # pragma: no cover - not on Linux/macOS
            limit = None
        values: dict[str, Any] = {"open_file_limit": limit}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# --------------------------------------------------------------------------------------------
# the knowledge, as tables (imported by the code linter too)
# --------------------------------------------------------------------------------------------

#: settings that do nothing in torch 2.13: name -> why, and what to use instead. Keys in upper
#: case are environment variables; dotted keys are Python attributes whose assignment changes
#: nothing (look one up by its last part with :func:`noop_setting`).
NOOP_SETTINGS: dict[str, str] = {
    "NCCL_TIMEOUT": (
        "NCCL has no timeout variable and torch 2.13 never looks at NCCL_TIMEOUT (no such string in its "
        "libraries or Python code): the job keeps the default process-group timeout (10 min for NCCL, "
        "30 min for gloo) while you believe it changed. Pass `timeout=` to `init_process_group` / `new_group`."
    ),
    "torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT": (
        "distributed_c10d has no `_DEFAULT_PG_TIMEOUT` in torch 2.13: the assignment creates a new attribute "
        "that nothing reads (the C++ constant of that name was copied into `default_pg_timeout` when "
        "torch.distributed was imported). Pass `timeout=` to `init_process_group` / `new_group`."
    ),
    "torch.distributed.constants.default_pg_timeout": (
        "distributed_c10d copied it at import (`from .constants import default_pg_timeout`); assigning the "
        "constants module's name later changes nothing (measured: gloo's default stays 30 min). "
        "Pass `timeout=` to `init_process_group` / `new_group`."
    ),
    "torch.distributed.constants.default_pg_nccl_timeout": (
        "distributed_c10d copied it at import, like `default_pg_timeout`; assigning it later changes nothing. "
        "Pass `timeout=` to `init_process_group` / `new_group`."
    ),
}

#: deprecated name -> current name (verified in torch 2.13's ProcessGroupNCCL.hpp / FlightRecorder.hpp).
#: torch still honours the old name with the warning "Environment variable OLD is deprecated; use
#: NEW instead"; when both are set the new one wins.
DEPRECATED_ALIASES: dict[str, str] = {
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG",
    "NCCL_ENABLE_TIMING": "TORCH_NCCL_ENABLE_TIMING",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_CPP_STACK": "TORCH_FR_CPP_STACK",
}

#: variables neither torch nor NCCL reads, that a script may read itself (seed 000's
#: ``NCCL_TIMEOUT_MINUTES``): they work only if the script passes them on
SCRIPT_VARIABLE_PREFIXES: tuple[str, ...] = ("NCCL_TIMEOUT_",)

#: variables that switch off a fast NCCL transport when true -> the transport
DISABLED_TRANSPORTS: dict[str, str] = {
    "NCCL_P2P_DISABLE": "GPU peer-to-peer (NVLink/PCIe P2P)",
    "NCCL_IB_DISABLE": "InfiniBand/RoCE",
}


def noop_setting(name: str) -> str | None:
    """Why setting ``name`` does nothing, or ``None``. ``name`` is an environment variable or an
    attribute as a script spells it (``'_DEFAULT_PG_TIMEOUT'``, ``'c10d._DEFAULT_PG_TIMEOUT'``,
    ``'torch.distributed.constants.default_pg_timeout'``). ``default_pg_timeout`` counts only on the
    ``constants`` module: assigning ``distributed_c10d.default_pg_timeout`` does change gloo's default.

    >>> noop_setting("NCCL_TIMEOUT") is not None, noop_setting("NCCL_DEBUG")
    (True, None)
    >>> noop_setting("dist.distributed_c10d._DEFAULT_PG_TIMEOUT") is not None
    True
    >>> noop_setting("constants.default_pg_timeout") is not None, noop_setting("c10d.default_pg_timeout")
    (True, None)
    """
    if name in NOOP_SETTINGS:
        return NOOP_SETTINGS[name]
    module, _, attr = name.rpartition(".")
    for key, why in NOOP_SETTINGS.items():
        key_module, _, key_attr = key.rpartition(".")
        if not key_module or key_attr != attr:
            continue
        if key_module.endswith(".constants") and not (module == "constants" or module.endswith(".constants")):
            continue
        return why
    return None


_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})
_FALSE = frozenset({"0", "n", "no", "f", "false", "off"})

# a rough count of the descriptors a rank holds before its DataLoader workers (libraries,
# CUDA/NCCL sockets and pipes, log files)
_BASE_FDS = 256
#: descriptors one worker holds besides its batches in flight (pipes, queues, shared memory)
_FDS_PER_WORKER = 8
#: below this the heartbeat monitor may abort a busy but healthy watchdog
_SHORT_HEARTBEAT_S = 60
_LONG_PG_TIMEOUT_S = 3600
_SHORT_PG_TIMEOUT_S = 60
_TIMEOUT_IN_CODE = ("Pass the timeout in code: `dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))` "
                    "(and `new_group(timeout=)` for subgroups)")


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# the checks: one small function each, over the environment and the settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    env: Mapping[str, str]
    settings: TrainingSettings

    def true(self, name: str) -> bool:
        return self.env.get(name, "").strip().lower() in _TRUE


def _noop_variables(ctx: _Context) -> Iterator[DoctorFinding]:
    for name in sorted(k for k in NOOP_SETTINGS if "." not in k and k in ctx.env):
        yield DoctorFinding(
            check="nccl-timeout-unread" if name == "NCCL_TIMEOUT" else "setting-unread",
            severity=Severity.ERROR,
            subject=name,
            what=f"{name}={ctx.env[name]} is set, and nothing reads it.",
            why=NOOP_SETTINGS[name],
            fix=f"{_TIMEOUT_IN_CODE}; then unset {name}.",
        )


def _script_variables(ctx: _Context) -> Iterator[DoctorFinding]:
    for name in sorted(k for k in ctx.env if k.startswith(SCRIPT_VARIABLE_PREFIXES)):
        yield DoctorFinding(
            check="nccl-timeout-script-variable",
            severity=Severity.INFO,
            subject=name,
            what=f"{name}={ctx.env[name]} is set.",
            why=("Neither torch nor NCCL reads it: it only works if your script reads it and passes it to "
                 "`init_process_group(timeout=)`."),
            fix="Check that your script passes it to `init_process_group(timeout=)`.",
        )


def _deprecated_aliases(ctx: _Context) -> Iterator[DoctorFinding]:
    env = ctx.env
    for old, new in DEPRECATED_ALIASES.items():
        if old not in env:
            continue
        both = new in env
        yield DoctorFinding(
            check="deprecated-alias",
            severity=Severity.WARNING,
            subject=old,
            what=f"{old}={env[old]} uses the deprecated name of {new}"
                 + (f" (also set: {new}={env[new]}, which wins)." if both else "."),
            why=("torch 2.13 still honours it but warns 'Environment variable "
                 f"{old} is deprecated; use {new} instead'; old names get removed, and when both are set the "
                 "new one silently wins."),
            fix=f"Rename it to {new}" + (" and drop the old one." if both else "."),
        )


#: why ``TORCH_NCCL_ASYNC_ERROR_HANDLING=0`` is a hazard (the doctor's check and the lint's rule say it alike)
ASYNC_ERROR_HANDLING_OFF_WHY = ("The watchdog then reports a timed-out collective but does not abort it: the job can "
                                "hang for hours instead of failing at the timeout.")


def _async_error_handling_off(ctx: _Context) -> Iterator[DoctorFinding]:
    aeh = ctx.env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", ctx.env.get("NCCL_ASYNC_ERROR_HANDLING"))
    if aeh is None or aeh.strip() != "0":
        return
    yield DoctorFinding(
        check="async-error-handling-off",
        severity=Severity.ERROR,
        subject="TORCH_NCCL_ASYNC_ERROR_HANDLING",
        what="Async error handling is off (TORCH_NCCL_ASYNC_ERROR_HANDLING=0).",
        why=ASYNC_ERROR_HANDLING_OFF_WHY,
        fix="Unset it (torch's default is 3: tear down without waiting on a hung NCCL abort).",
    )


def _blocking_wait(ctx: _Context) -> Iterator[DoctorFinding]:
    name = "TORCH_NCCL_BLOCKING_WAIT" if "TORCH_NCCL_BLOCKING_WAIT" in ctx.env else "NCCL_BLOCKING_WAIT"
    if not ctx.true(name):
        return
    yield DoctorFinding(
        check="blocking-wait",
        severity=Severity.WARNING,
        subject=name,
        what=f"{name}={ctx.env[name]}: blocking wait is on.",
        why=("Measured on an H200 with torch 2.11: only `work.wait()` of an `async_op=True` collective then "
             "raises on a timeout. A synchronous `dist.all_reduce(t)` (and DDP's) returns at once as without "
             "it, and the watchdog leaves timeouts to `wait()`: a hang there is reported by nobody."),
        fix=("Unset it and let the watchdog report timeouts (its default, TORCH_NCCL_ASYNC_ERROR_HANDLING=3, "
             "ends the process; 2 aborts the communicators and keeps it)."),
    )


def _heartbeat_monitor_off(ctx: _Context) -> Iterator[DoctorFinding]:
    monitoring = ctx.env.get("TORCH_NCCL_ENABLE_MONITORING")
    if monitoring is None or monitoring.strip().lower() not in _FALSE:
        return
    yield DoctorFinding(
        check="heartbeat-monitor-off",
        severity=Severity.WARNING,
        subject="TORCH_NCCL_ENABLE_MONITORING",
        what="The NCCL heartbeat monitor is off (TORCH_NCCL_ENABLE_MONITORING=0).",
        why="A rank whose watchdog is stuck in a CUDA/NCCL call then hangs forever instead of dumping and exiting.",
        fix="Unset it; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC instead if the monitor fires on real work.",
    )


def _heartbeat_timeout_short(ctx: _Context) -> Iterator[DoctorFinding]:
    heartbeat = _int(ctx.env.get("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"))
    if heartbeat is None or heartbeat >= _SHORT_HEARTBEAT_S:
        return
    yield DoctorFinding(
        check="heartbeat-timeout-short",
        severity=Severity.WARNING,
        subject="TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
        what=f"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC={heartbeat} is short.",
        why="A busy but healthy watchdog can miss it and the process is aborted as 'stuck' (false positive).",
        fix="Use several minutes (torch's default is 480 s).",
    )


def _transports_disabled(ctx: _Context) -> Iterator[DoctorFinding]:
    for name, path in DISABLED_TRANSPORTS.items():
        if not ctx.true(name):
            continue
        yield DoctorFinding(
            check="transport-disabled",
            severity=Severity.WARNING,
            subject=name,
            what=f"{name}={ctx.env[name]} turns off {path}.",
            why=("NCCL falls back to slower paths (shared memory / TCP sockets): collectives get several times "
                 "slower, which makes timeouts more likely, not less. It is a workaround for broken "
                 "hardware, not a fix for hangs."),
            fix=f"Unset {name} unless a known hardware/driver problem needs it (then note why).",
        )


def _debug_settings(ctx: _Context) -> Iterator[DoctorFinding]:
    """While debugging: what is missing. Otherwise: DETAIL left on."""
    detail = ctx.env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
    if not ctx.settings.debugging:
        if detail:
            yield DoctorFinding(
                check="distributed-debug-detail",
                severity=Severity.INFO,
                subject="TORCH_DISTRIBUTED_DEBUG",
                what="TORCH_DISTRIBUTED_DEBUG=DETAIL is set.",
                why="It checks every collective across ranks: right while debugging, a cost in production.",
                fix="Turn it off for production runs.",
            )
        return
    if "NCCL_DEBUG" not in ctx.env:
        yield DoctorFinding(
            check="nccl-debug-unset",
            severity=Severity.WARNING,
            subject="NCCL_DEBUG",
            what="NCCL_DEBUG is not set while debugging.",
            why="NCCL then prints nothing about which transport, interface or call failed.",
            fix="Set NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET to keep it short) for the failing run.",
        )
    if not detail:
        yield DoctorFinding(
            check="distributed-debug-off",
            severity=Severity.INFO,
            subject="TORCH_DISTRIBUTED_DEBUG",
            what="TORCH_DISTRIBUTED_DEBUG is not DETAIL.",
            why=("With DETAIL a collective called with a different op, order or shape on one rank fails at "
                 "once on every rank with a CollectiveFingerPrint report, instead of hanging."),
            fix="Set TORCH_DISTRIBUTED_DEBUG=DETAIL before torch is imported (it costs speed: debugging only).",
        )


def _cuda_launch_blocking(ctx: _Context) -> Iterator[DoctorFinding]:
    if ctx.env.get("CUDA_LAUNCH_BLOCKING", "").strip() not in _TRUE:
        return
    yield DoctorFinding(
        check="cuda-launch-blocking",
        severity=Severity.WARNING,
        subject="CUDA_LAUNCH_BLOCKING",
        what="CUDA_LAUNCH_BLOCKING=1 is set.",
        why="Every kernel launch waits for completion: training runs far slower (and times out sooner).",
        fix="Use it only to locate a CUDA error, then unset it.",
    )


def _flight_recorder(ctx: _Context) -> Iterator[DoctorFinding]:
    env = ctx.env
    fr = env.get("TORCH_FR_BUFFER_SIZE", env.get("TORCH_NCCL_TRACE_BUFFER_SIZE"))
    if fr is not None and _int(fr) == 0:
        yield DoctorFinding(
            check="flight-recorder-off",
            severity=Severity.WARNING,
            subject="TORCH_FR_BUFFER_SIZE",
            what="The flight recorder is off (buffer size 0).",
            why=("After a timeout there is then no record of which collectives each rank issued: the log says "
                 "'Stack trace of the failed collective not found' and the late rank cannot be named."),
            fix="Unset it (2.13 keeps 2000 entries by default) or set TORCH_FR_BUFFER_SIZE=2000.",
        )
    elif ctx.settings.debugging and "TORCH_FR_DUMP_TEMP_FILE" not in env and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in env:
        yield DoctorFinding(
            check="flight-recorder-dump-location",
            severity=Severity.INFO,
            subject="TORCH_FR_DUMP_TEMP_FILE",
            what="No flight-recorder dump location is set.",
            why="Per-rank dumps land in each node's /tmp and are easy to lose; they are what names the late rank.",
            fix=("Set TORCH_FR_DUMP_TEMP_FILE=/shared/path/nccl_trace_rank_ (a prefix; one file per rank) and "
                 "keep TORCH_NCCL_DUMP_ON_TIMEOUT on; analyse with `torchfrtrace`."),
        )


def _dataloader_timeout(ctx: _Context) -> Iterator[DoctorFinding]:
    s = ctx.settings
    if s.pg_timeout_s is None or s.dataloader_timeout_s is None:
        return
    suggested = max(1, int(s.pg_timeout_s / 2))
    if s.dataloader_timeout_s == 0:
        yield DoctorFinding(
            check="dataloader-timeout-off",
            severity=Severity.INFO,
            subject="dataloader_timeout_s",
            what="The DataLoader has no timeout (timeout=0).",
            why=("A stuck worker then shows up only as a collective timeout on the *other* ranks, naming a "
                 "collective instead of the data loader."),
            fix=f"Set `DataLoader(timeout=)` below the process-group timeout, e.g. {suggested} s.",
        )
    elif s.dataloader_timeout_s >= s.pg_timeout_s:
        yield DoctorFinding(
            check="dataloader-timeout-not-below-pg",
            severity=Severity.ERROR,
            subject="dataloader_timeout_s",
            what=(f"DataLoader timeout {s.dataloader_timeout_s:g} s is not below the process-group timeout "
                  f"{s.pg_timeout_s:g} s."),
            why=("When one rank's loader hangs, the other ranks' collective times out first (or at the same "
                 "moment) and the error points at the collective, not at the stuck loader."),
            fix=f"Set the DataLoader timeout well below it, e.g. {suggested} s.",
        )


def _pg_timeout_extremes(ctx: _Context) -> Iterator[DoctorFinding]:
    timeout_s = ctx.settings.pg_timeout_s
    if timeout_s is None:
        return
    if timeout_s > _LONG_PG_TIMEOUT_S:
        yield DoctorFinding(
            check="pg-timeout-long",
            severity=Severity.INFO,
            subject="pg_timeout_s",
            what=f"The process-group timeout is {timeout_s / 60:g} min.",
            why=("A long timeout does not fix a late rank, it only makes a real hang cost that long; it fits "
                 "only known long single-rank phases."),
            fix="Prefer making the slow phase collective-free or shorter; keep the timeout near the longest real wait.",
        )
    elif timeout_s < _SHORT_PG_TIMEOUT_S:
        yield DoctorFinding(
            check="pg-timeout-short",
            severity=Severity.WARNING,
            subject="pg_timeout_s",
            what=f"The process-group timeout is {timeout_s:g} s.",
            why="A checkpoint, evaluation or first-step compilation on one rank can exceed it: false timeouts.",
            fix="Use at least a few minutes in training jobs (short timeouts suit tests and these notebooks).",
        )


def _open_files(ctx: _Context) -> Iterator[DoctorFinding]:
    s = ctx.settings
    if s.workers_per_rank is None or s.open_file_limit is None or s.workers_per_rank <= 0:
        return
    estimate = _BASE_FDS + s.workers_per_rank * (_FDS_PER_WORKER + s.prefetch_factor * s.tensors_per_batch)
    if estimate < s.open_file_limit / 2:
        return
    host_note = (f"; {s.ranks_per_host} ranks per host make about {estimate * s.ranks_per_host} on the host, each "
                 "process counted against its own limit" if s.ranks_per_host else "")
    yield DoctorFinding(
        check="open-files-tight",
        severity=Severity.ERROR if estimate >= s.open_file_limit else Severity.WARNING,
        subject="open_file_limit",
        what=(f"{s.workers_per_rank} DataLoader workers per rank need roughly {estimate} open files per rank "
              f"(rule of thumb: {_BASE_FDS} + workers x ({_FDS_PER_WORKER} + prefetch x tensors per batch))"
              f"{host_note}; the limit is {s.open_file_limit}."),
        why=("Each batch in flight holds shared-memory file descriptors; at the limit the loader fails "
             "with 'Too many open files' and that rank stops, leaving the others in a collective timeout."),
        fix=("Fewer workers per rank, `ulimit -n 65536` in the launcher's shell (or the job's limits), or "
             "`torch.multiprocessing.set_sharing_strategy('file_system')`."),
    )


#: every check, in report order within one severity
CHECKS: tuple[Callable[[_Context], Iterable[DoctorFinding]], ...] = (
    _noop_variables,
    _script_variables,
    _deprecated_aliases,
    _async_error_handling_off,
    _blocking_wait,
    _heartbeat_monitor_off,
    _heartbeat_timeout_short,
    _transports_disabled,
    _debug_settings,
    _cuda_launch_blocking,
    _flight_recorder,
    _dataloader_timeout,
    _pg_timeout_extremes,
    _open_files,
)

_SEVERITY_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def check(env: Mapping[str, str] | None = None, settings: TrainingSettings | None = None) -> list[DoctorFinding]:
    """Environment + settings -> findings, most severe first. Empty when nothing is wrong.

    ``env`` defaults to ``os.environ``; ``settings=None`` skips the checks that need them.
    """
    ctx = _Context(dict(os.environ if env is None else env), settings or TrainingSettings())
    out = [finding for one_check in CHECKS for finding in one_check(ctx)]
    out.sort(key=lambda f: _SEVERITY_ORDER[f.severity])
    return out


def render_text(findings: list[DoctorFinding]) -> str:
    """Findings -> the readable report of ``nccl-workbook doctor``."""
    if not findings:
        return "nccl-workbook doctor: nothing to report.\n"
    lines = [f"nccl-workbook doctor: {len(findings)} finding(s)", ""]
    for f in findings:
        lines.append(f"[{f.severity.value}] {f.what}")
        lines.append(f"    why: {f.why}")
        lines.append(f"    fix: {f.fix}")
    return "\n".join(lines) + "\n"
