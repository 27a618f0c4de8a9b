"""torch's flight recorder: per-rank dumps on disk, torch's own analyzer, and the workbook's
trace frame and diagnosis on the same dumps.

torch keeps a per-process ring buffer of the last collectives (the *flight recorder*): op,
process group, sequence number, sizes, state, times, Python stack. An NCCL job writes it to disk
on a collective timeout; the workbook brings it back from every rank of a run
(``RunResult.fr_dumps``). This package

- writes and reads dumps in torch 2.13's on-disk format (:func:`write_dumps`, :func:`load_dumps`):
  one pickle per rank named ``<prefix><rank>``, the prefix from ``TORCH_FR_DUMP_TEMP_FILE``
  (older name ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``), default
  ``$XDG_CACHE_HOME/torch/comm_lib_trace_rank_`` or ``~/.cache/torch/comm_lib_trace_rank_``;
  ``torch._C._distributed_c10d._dump_fr_trace_json()`` output (JSON) loads too;
- fixes gloo dumps up so that torch's analyzer (``torchfrtrace``, i.e.
  ``torch.distributed.flight_recorder.fr_trace``) accepts them (:func:`fix_for_torch`) and runs
  that analyzer, returning its verdict as a value (:func:`run_torch_analyzer`);
- turns dumps into the workbook's trace frame (:func:`trace_from_dumps`, same columns as
  :mod:`nccl_workbook.trace`) so that :func:`nccl_workbook.diagnose.diagnose` and
  :func:`nccl_workbook.plots.timeline` work on them (:func:`diagnose_dumps`);
- cuts dumps at the moment the first collective timed out (:func:`as_of_first_timeout`), which is
  what NCCL's coordinated dump-on-timeout captures.

What torch 2.13 records, measured here (gloo on CPU) and read in its source (NCCL):

========================= ================================== ===================================
                          gloo (measured)                    NCCL (source, not run here)
========================= ================================== ===================================
``state``                 always ``scheduled``               ``scheduled`` -> ``started`` (only
                                                             with ``TORCH_NCCL_ENABLE_TIMING``)
                                                             -> ``completed``
``time_discovered_*_ns``  ``None``                           set when the watchdog sees it
``pg_config``             one placeholder keyed ``''``       ``{pg name: {name, desc, ranks}}``
``pg_status``             per ``pg_id``; a collective that   per ``pg_id``
                          failed counts as completed
barrier                   ``gloo:barrier`` (no tensor)       ``nccl:all_reduce_barrier`` (1 float;
                                                             the watchdog prints ``ALLREDUCE``)
========================= ================================== ===================================

Because gloo records no completion, a gloo entry's fate is *inferred*: a rank that moved on to
the next collective of the group finished it; a rank's last collective of a group counts as
completed when every member reached it, with the same op, size and dtype, within the timeout, and as
in flight (``running``) otherwise. A dump also cannot tell a rank that timed out from one that
found its peers gone: every rank left inside an unfinished collective has status ``timeout`` in
:func:`statuses_from_dumps`.

The ring buffer is per process and outlives process groups: an engine's dump also holds the
entries of earlier runs on it. :func:`select_run` keeps the entries from the newest default
process group on (plus the groups created after it); every analysis here applies it.

Known limits: real NCCL dumps were not available here (no GPU): the NCCL path is tested on
synthetic dumps built field by field from torch 2.13's recorder source (``FlightRecorder.hpp``,
``FlightRecorderDetail.hpp``) and its tests. The membership of a gloo subgroup is not in the dump;
it is rebuilt from the ranks whose dumps use the group (a member that never called a collective
on it is not seen). Dumps are pickles: :func:`load_dumps` unpickles plain containers only (the
recorder writes nothing else) and refuses any other object.

Modules: :mod:`~nccl_workbook.flight.dumps` (the format: typed entries, read, write, select, fix
up, cut), :mod:`~nccl_workbook.flight.analysis` (trace frame, diagnosis, torch's analyzer, the
report), :mod:`~nccl_workbook.flight.commands` (``nccl-workbook fr FOLDER``).

Usage::

    result = run_scenario(cluster, "rank0-work-before-barrier", "broken")
    folder = write_dumps(result, "fr_dumps")[0].parent     # comm_lib_trace_rank_0 .. _3
    dumps = load_dumps("fr_dumps")                         # or your NCCL job's dump folder
    run_torch_analyzer(dumps).status                       # AnalyzerStatus.CRASHED (KeyError)
    run_torch_analyzer(fix_for_torch(dumps)).status        # AnalyzerStatus.NO_ISSUE
    diagnose_dumps(dumps).culprit_ranks                    # (0,): arrived 4.8 s late
    run_torch_analyzer(fix_for_torch(as_of_first_timeout(dumps))).missing_ranks  # (0,)
    analyze_dumps(dumps)                                   # FlightReport: both verdicts, one value
"""

from __future__ import annotations

from nccl_workbook.flight.analysis import (
    AnalyzerStatus,
    AnalyzerVerdict,
    FlightReport,
    analyze_dumps,
    as_of_first_timeout,
    diagnose_dumps,
    first_timeout_ns,
    run_torch_analyzer,
    statuses_from_dumps,
    trace_from_dumps,
)
from nccl_workbook.flight.dumps import (
    FR_ENV_VARS,
    FR_FILE_PREFIX,
    EntryState,
    FlightDump,
    FlightDumpError,
    FlightDumps,
    FlightEntry,
    FlightFrame,
    ProcessGroupConfig,
    ProcessGroupStatus,
    dumps_from_result,
    fix_for_torch,
    load_dumps,
    nccl_op_name,
    parse_dump,
    select_run,
    snapshot_at,
    write_dumps,
)

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
    "AnalyzerStatus",
    "AnalyzerVerdict",
    "FlightReport",
    "parse_dump",
    "dumps_from_result",
    "write_dumps",
    "load_dumps",
    "select_run",
    "fix_for_torch",
    "snapshot_at",
    "first_timeout_ns",
    "as_of_first_timeout",
    "run_torch_analyzer",
    "trace_from_dumps",
    "statuses_from_dumps",
    "diagnose_dumps",
    "analyze_dumps",
    "nccl_op_name",
]
