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

Known limits: the checks read variables and numbers; they cannot see what a script does in code
(``torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT = ...`` does not exist in 2.13 and
changes nothing: only ``init_process_group(timeout=)`` counts). The open-file estimate is a rough
rule of thumb, said as such.

Usage::

    from nccl_workbook.doctor import TrainingSettings, check
    for finding in check(env={"NCCL_TIMEOUT": "3600"},
                         settings=TrainingSettings(pg_timeout_s=600, dataloader_timeout_s=600)):
        print(finding.severity.value, finding.what)
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Severity",
    "DoctorFinding",
    "TrainingSettings",
    "check",
    "render_text",
    "DEPRECATED_ALIASES",
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


#: deprecated name -> current name (verified in torch 2.13's ProcessGroupNCCL.hpp / FlightRecorder.hpp)
DEPRECATED_ALIASES: dict[str, str] = {
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG",
    "NCCL_ENABLE_TIMING": "TORCH_NCCL_ENABLE_TIMING",
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "TORCH_FR_BUFFER_SIZE",
    "TORCH_NCCL_TRACE_CPP_STACK": "TORCH_FR_CPP_STACK",
}

_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})
_FALSE = frozenset({"0", "n", "no", "f", "false", "off"})

# a rough count of the descriptors a rank holds before its DataLoader workers (libraries,
# CUDA/NCCL sockets and pipes, log files)
_BASE_FDS = 256


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def check(env: Mapping[str, str] | None = None, settings: TrainingSettings | None = None) -> list[DoctorFinding]:
    """Environment + settings -> findings, most severe first. Empty when nothing is wrong.

    ``env`` defaults to ``os.environ``; ``settings=None`` skips the checks that need them.
    """
    env = dict(os.environ if env is None else env)
    s = settings or TrainingSettings()
    out: list[DoctorFinding] = []

    # -- variables nobody reads ---------------------------------------------------------------
    if "NCCL_TIMEOUT" in env:
        out.append(DoctorFinding(
            check="nccl-timeout-unread",
            severity=Severity.ERROR,
            subject="NCCL_TIMEOUT",
            what=f"NCCL_TIMEOUT={env['NCCL_TIMEOUT']} is set, and nothing reads it.",
            why=("NCCL has no timeout variable and torch 2.13 never looks at NCCL_TIMEOUT: the job keeps the "
                 "default process-group timeout (10 min for NCCL) while you believe it changed."),
            fix=("Pass the timeout in code: `dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))` "
                 "(and `new_group(timeout=)` for subgroups); then unset NCCL_TIMEOUT."),
        ))
    for name in sorted(k for k in env if k.startswith("NCCL_TIMEOUT_") or k in ("NCCL_TIMEOUT_MS", "NCCL_TIMEOUT_S")):
        out.append(DoctorFinding(
            check="nccl-timeout-script-variable",
            severity=Severity.INFO,
            subject=name,
            what=f"{name}={env[name]} is set.",
            why=("Neither torch nor NCCL reads it: it only works if your script reads it and passes it to "
                 "`init_process_group(timeout=)`."),
            fix="Check that your script passes it to `init_process_group(timeout=)`.",
        ))

    # -- deprecated aliases ----------------------------------------------------------------------
    for old, new in DEPRECATED_ALIASES.items():
        if old not in env:
            continue
        both = new in env
        out.append(DoctorFinding(
            check="deprecated-alias",
            severity=Severity.WARNING,
            subject=old,
            what=f"{old}={env[old]} uses the deprecated name of {new}"
                 + (f" (also set: {new}={env[new]}, which wins)." if both else "."),
            why=("torch 2.13 still honours it but warns 'Environment variable "
                 f"{old} is deprecated; use {new} instead'; old names get removed, and when both are set the "
                 "new one silently wins."),
            fix=f"Rename it to {new}" + (" and drop the old one." if both else "."),
        ))

    # -- error handling / monitoring -----------------------------------------------------------
    aeh = env.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", env.get("NCCL_ASYNC_ERROR_HANDLING"))
    if aeh is not None and aeh.strip() == "0":
        out.append(DoctorFinding(
            check="async-error-handling-off",
            severity=Severity.ERROR,
            subject="TORCH_NCCL_ASYNC_ERROR_HANDLING",
            what="Async error handling is off (TORCH_NCCL_ASYNC_ERROR_HANDLING=0).",
            why=("The watchdog then reports a timed-out collective but does not abort it: the job can hang for "
                 "hours instead of failing at the timeout."),
            fix="Unset it (torch's default is 3: tear down without waiting on a hung NCCL abort).",
        ))
    monitoring = env.get("TORCH_NCCL_ENABLE_MONITORING")
    if monitoring is not None and monitoring.strip().lower() in _FALSE:
        out.append(DoctorFinding(
            check="heartbeat-monitor-off",
            severity=Severity.WARNING,
            subject="TORCH_NCCL_ENABLE_MONITORING",
            what="The NCCL heartbeat monitor is off (TORCH_NCCL_ENABLE_MONITORING=0).",
            why="A rank whose watchdog is stuck in a CUDA/NCCL call then hangs forever instead of dumping and exiting.",
            fix="Unset it; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC instead if the monitor fires on real work.",
        ))
    heartbeat = _int(env.get("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"))
    if heartbeat is not None and heartbeat < 60:
        out.append(DoctorFinding(
            check="heartbeat-timeout-short",
            severity=Severity.WARNING,
            subject="TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
            what=f"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC={heartbeat} is short.",
            why="A busy but healthy watchdog can miss it and the process is aborted as 'stuck' (false positive).",
            fix="Use several minutes (torch's default is 480 s).",
        ))

    # -- slow transports left disabled ------------------------------------------------------------
    for name, path in (("NCCL_P2P_DISABLE", "GPU peer-to-peer (NVLink/PCIe P2P)"),
                       ("NCCL_IB_DISABLE", "InfiniBand/RoCE")):
        value = env.get(name)
        if value is not None and value.strip().lower() in _TRUE:
            out.append(DoctorFinding(
                check="transport-disabled",
                severity=Severity.WARNING,
                subject=name,
                what=f"{name}={value} turns off {path}.",
                why=("NCCL falls back to slower paths (shared memory / TCP sockets): collectives get several times "
                     "slower, which makes timeouts more likely, not less. It is a workaround for broken "
                     "hardware, not a fix for hangs."),
                fix=f"Unset {name} unless a known hardware/driver problem needs it (then note why).",
            ))

    # -- debugging aids -------------------------------------------------------------------------
    if s.debugging:
        if "NCCL_DEBUG" not in env:
            out.append(DoctorFinding(
                check="nccl-debug-unset",
                severity=Severity.WARNING,
                subject="NCCL_DEBUG",
                what="NCCL_DEBUG is not set while debugging.",
                why="NCCL then prints nothing about which transport, interface or call failed.",
                fix="Set NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET to keep it short) for the failing run.",
            ))
        if env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() != "DETAIL":
            out.append(DoctorFinding(
                check="distributed-debug-off",
                severity=Severity.INFO,
                subject="TORCH_DISTRIBUTED_DEBUG",
                what="TORCH_DISTRIBUTED_DEBUG is not DETAIL.",
                why=("With DETAIL a collective called with a different op, order or shape on one rank fails at "
                     "once on every rank with a CollectiveFingerPrint report, instead of hanging."),
                fix="Set TORCH_DISTRIBUTED_DEBUG=DETAIL before torch is imported (it costs speed: debugging only).",
            ))
    elif env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        out.append(DoctorFinding(
            check="distributed-debug-detail",
            severity=Severity.INFO,
            subject="TORCH_DISTRIBUTED_DEBUG",
            what="TORCH_DISTRIBUTED_DEBUG=DETAIL is set.",
            why="It checks every collective across ranks: right while debugging, a cost in production.",
            fix="Turn it off for production runs.",
        ))
    if env.get("CUDA_LAUNCH_BLOCKING", "").strip() in _TRUE:
        out.append(DoctorFinding(
            check="cuda-launch-blocking",
            severity=Severity.WARNING,
            subject="CUDA_LAUNCH_BLOCKING",
            what="CUDA_LAUNCH_BLOCKING=1 is set.",
            why="Every kernel launch waits for completion: training runs far slower (and times out sooner).",
            fix="Use it only to locate a CUDA error, then unset it.",
        ))

    # -- flight recorder ------------------------------------------------------------------------
    fr = env.get("TORCH_FR_BUFFER_SIZE", env.get("TORCH_NCCL_TRACE_BUFFER_SIZE"))
    if fr is not None and _int(fr) == 0:
        out.append(DoctorFinding(
            check="flight-recorder-off",
            severity=Severity.WARNING,
            subject="TORCH_FR_BUFFER_SIZE",
            what="The flight recorder is off (buffer size 0).",
            why=("After a timeout there is then no record of which collectives each rank issued: the log says "
                 "'Stack trace of the failed collective not found' and the late rank cannot be named."),
            fix="Unset it (2.13 keeps 2000 entries by default) or set TORCH_FR_BUFFER_SIZE=2000.",
        ))
    elif s.debugging and "TORCH_FR_DUMP_TEMP_FILE" not in env and "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" not in env:
        out.append(DoctorFinding(
            check="flight-recorder-dump-location",
            severity=Severity.INFO,
            subject="TORCH_FR_DUMP_TEMP_FILE",
            what="No flight-recorder dump location is set.",
            why="Per-rank dumps land in each node's /tmp and are easy to lose; they are what names the late rank.",
            fix=("Set TORCH_FR_DUMP_TEMP_FILE=/shared/path/nccl_trace_rank_ (a prefix; one file per rank) and "
                 "keep TORCH_NCCL_DUMP_ON_TIMEOUT on; analyse with `torchfrtrace`."),
        ))

    # -- settings: timeouts -----------------------------------------------------------------------
    if s.pg_timeout_s is not None and s.dataloader_timeout_s is not None:
        if s.dataloader_timeout_s == 0:
            out.append(DoctorFinding(
                check="dataloader-timeout-off",
                severity=Severity.INFO,
                subject="dataloader_timeout_s",
                what="The DataLoader has no timeout (timeout=0).",
                why=("A stuck worker then shows up only as a collective timeout on the *other* ranks, naming a "
                     "collective instead of the data loader."),
                fix=f"Set `DataLoader(timeout=)` below the process-group timeout, e.g. {max(1, int(s.pg_timeout_s / 2))} s.",
            ))
        elif s.dataloader_timeout_s >= s.pg_timeout_s:
            out.append(DoctorFinding(
                check="dataloader-timeout-not-below-pg",
                severity=Severity.ERROR,
                subject="dataloader_timeout_s",
                what=(f"DataLoader timeout {s.dataloader_timeout_s:g} s is not below the process-group timeout "
                      f"{s.pg_timeout_s:g} s."),
                why=("When one rank's loader hangs, the other ranks' collective times out first (or at the same "
                     "moment) and the error points at the collective, not at the stuck loader."),
                fix=f"Set the DataLoader timeout well below it, e.g. {max(1, int(s.pg_timeout_s / 2))} s.",
            ))
    if s.pg_timeout_s is not None:
        if s.pg_timeout_s > 3600:
            out.append(DoctorFinding(
                check="pg-timeout-long",
                severity=Severity.INFO,
                subject="pg_timeout_s",
                what=f"The process-group timeout is {s.pg_timeout_s / 60:g} min.",
                why=("A long timeout does not fix a late rank, it only makes a real hang cost that long; it fits "
                     "only known long single-rank phases."),
                fix="Prefer making the slow phase collective-free or shorter; keep the timeout near the longest real wait.",
            ))
        elif s.pg_timeout_s < 60:
            out.append(DoctorFinding(
                check="pg-timeout-short",
                severity=Severity.WARNING,
                subject="pg_timeout_s",
                what=f"The process-group timeout is {s.pg_timeout_s:g} s.",
                why="A checkpoint, evaluation or first-step compilation on one rank can exceed it: false timeouts.",
                fix="Use at least a few minutes in training jobs (short timeouts suit tests and these notebooks).",
            ))

    # -- settings: open files ---------------------------------------------------------------------
    if s.workers_per_rank is not None and s.open_file_limit is not None and s.workers_per_rank > 0:
        per_worker = 8 + s.prefetch_factor * s.tensors_per_batch
        estimate = _BASE_FDS + s.workers_per_rank * per_worker
        host = estimate * (s.ranks_per_host or 1)
        host_note = (f"; {s.ranks_per_host} ranks per host make about {host} on the host, each process counted "
                     "against its own limit" if s.ranks_per_host else "")
        if estimate >= s.open_file_limit / 2:
            out.append(DoctorFinding(
                check="open-files-tight",
                severity=Severity.ERROR if estimate >= s.open_file_limit else Severity.WARNING,
                subject="open_file_limit",
                what=(f"{s.workers_per_rank} DataLoader workers per rank need roughly {estimate} open files per rank "
                      f"(rule of thumb: {_BASE_FDS} + workers x (8 + prefetch x tensors per batch)){host_note}; "
                      f"the limit is {s.open_file_limit}."),
                why=("Each batch in flight holds shared-memory file descriptors; at the limit the loader fails "
                     "with 'Too many open files' and that rank stops, leaving the others in a collective timeout."),
                fix=("Fewer workers per rank, `ulimit -n 65536` in the launcher's shell (or the job's limits), or "
                     "`torch.multiprocessing.set_sharing_strategy('file_system')`."),
            ))

    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    out.sort(key=lambda f: order[f.severity])
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
