"""Likely causes of a failed job, ranked, each pointing at the notebook that reproduces it.

Each rule looks for a pattern the workbook's scenarios produce and says why it fits, on which
ranks, with which confidence, and what fixes it. Confidence is a score in [0, 1] shown as
``high`` (>= 0.8), ``medium`` (>= 0.5) or ``low``. When nothing in the log separates the late rank
from the ranks that waited for it, the top finding says so plainly (``scenario=None``) and names
the evidence to collect next.

The scenario ids are stable; :data:`SCENARIO_NOTEBOOKS` is the one place that maps them to the
notebooks in ``notebooks/``.

Usage::

    findings = rank_causes(events, summarize(events))
    findings[0].scenario        # 'rank0-work-before-barrier'
    findings[0].notebook_path   # 'notebooks/01_rank0_work_before_barrier.ipynb'
    findings[0].culprit_ranks   # (0,)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from nccl_workbook.triage.events import Event, EventKind
from nccl_workbook.triage.job import JobSummary, _fmt

__all__ = [
    "SCENARIO_NOTEBOOKS",
    "Confidence",
    "Finding",
    "rank_causes",
    "notebook_for",
]

#: scenario id -> notebook file name (in ``notebooks/``). The one mapping triage uses.
SCENARIO_NOTEBOOKS: dict[str, str] = {
    "rank0-work-before-barrier": "01_rank0_work_before_barrier.ipynb",
    "slow-metrics-on-rank0": "02_slow_metrics_on_rank0.ipynb",
    "exception-on-one-rank": "03_exception_on_one_rank.ipynb",
    "dataloader-stall": "04_dataloader_stall.ipynb",
    "fd-exhaustion": "05_fd_exhaustion.ipynb",
    "uneven-eval-allgather": "06_uneven_eval_allgather.ipynb",
    "unused-parameters": "07_unused_parameters.ipynb",
    "collective-mismatch": "08_collective_mismatch.ipynb",
    "slow-rank-dynamic-shapes": "09_slow_rank_dynamic_shapes.ipynb",
    "timeout-settings": "10_timeout_settings.ipynb",
}


def notebook_for(scenario: str) -> str:
    """``'fd-exhaustion'`` -> ``'05_fd-exhaustion.ipynb'``; unknown ids are a clear error."""
    try:
        return SCENARIO_NOTEBOOKS[scenario]
    except KeyError:
        known = ", ".join(SCENARIO_NOTEBOOKS)
        raise KeyError(f"Unknown scenario {scenario!r}; known: {known}") from None


class Confidence(str, enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @classmethod
    def from_score(cls, score: float) -> Confidence:
        if score >= 0.8:
            return cls.HIGH
        if score >= 0.5:
            return cls.MEDIUM
        return cls.LOW


@dataclass(frozen=True)
class Finding:
    """One likely cause. ``scenario`` is ``None`` when no workbook scenario fits (or the log
    cannot decide); ``culprit_ranks`` are the ranks the evidence points at (may be empty)."""

    title: str
    scenario: str | None
    reason: str
    fix: str
    score: float
    culprit_ranks: tuple[int, ...] = ()
    evidence_lines: tuple[int, ...] = ()

    @property
    def confidence(self) -> Confidence:
        return Confidence.from_score(self.score)

    @property
    def notebook(self) -> str | None:
        """Notebook file name, e.g. ``'01_rank0-work-before-barrier.ipynb'``."""
        return SCENARIO_NOTEBOOKS.get(self.scenario) if self.scenario else None

    @property
    def notebook_path(self) -> str | None:
        return f"notebooks/{self.notebook}" if self.notebook else None

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "notebook": self.notebook_path,
            "title": self.title,
            "reason": self.reason,
            "confidence": self.confidence.value,
            "score": round(self.score, 2),
            "culprit_ranks": list(self.culprit_ranks),
            "fix": self.fix,
            "evidence_lines": list(self.evidence_lines),
        }


# --------------------------------------------------------------------------------------------

_ALLGATHER_OPS = frozenset({"ALLGATHER", "_ALLGATHER_BASE", "ALLGATHER_COALESCED", "ALLGATHER_INTO_TENSOR_COALESCED"})
_SCALAR_NUMEL = 16
_GRADIENT_NUMEL = 100_000


def _ranks(events: list[Event]) -> tuple[int, ...]:
    return tuple(sorted({e.rank for e in events if e.rank is not None}))


def _lines(events: list[Event], limit: int = 5) -> tuple[int, ...]:
    return tuple(sorted({e.line_no for e in events})[:limit])


def _of(events: list[Event], *kinds: EventKind) -> list[Event]:
    return [e for e in events if e.kind in kinds]


def _who(ranks: tuple[int, ...]) -> str:
    if not ranks:
        return "a rank the log does not name"
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_fmt(ranks)}"


def _late_ranks(summary: JobSummary) -> tuple[int, ...]:
    """Ranks the others most likely waited for: named late, behind, or silent."""
    if summary.named_late:
        return summary.named_late
    if summary.ranks_behind:
        return summary.ranks_behind
    return summary.ranks_missing


def rank_causes(events: list[Event] | tuple[Event, ...], summary: JobSummary) -> list[Finding]:
    """Events + summary -> findings, most likely first. Never empty: when nothing is recognised
    or nothing decides, the list holds one finding that says so."""
    events = list(events)
    out: list[Finding] = []
    timeouts = _of(events, EventKind.COLLECTIVE_TIMEOUT)
    waits = _of(events, EventKind.COLLECTIVE_TIMEOUT, EventKind.PEER_CLOSED, EventKind.MONITORED_BARRIER,
                EventKind.WATCHDOG_STUCK, EventKind.HEARTBEAT)
    first_wait_line = min((e.line_no for e in waits), default=None)
    waiting_ranks = _ranks(waits)
    late = _late_ranks(summary)
    op = summary.failed_op
    numel = summary.failed_numel
    where = f" (log basis for the rank list: {summary.world_size_basis})" if summary.world_size_basis != "stated" else ""

    # -- too many open files --------------------------------------------------------------
    fd = _of(events, EventKind.TOO_MANY_OPEN_FILES)
    if fd:
        ranks = _ranks(fd)
        out.append(Finding(
            title="File descriptors ran out",
            scenario="fd-exhaustion",
            reason=(f"'Too many open files' on {_who(ranks)} (line {fd[0].line_no}): the process hit its "
                    "open-file limit; a DataLoader then loses contact with its workers and that rank stops "
                    "feeding the collectives" + (", which is why the others timed out" if timeouts else "") + "."),
            fix=("Fewer DataLoader workers per rank (workers x ranks per host share the host's limits), raise "
                 "the limit (`ulimit -n 65536` in the launcher's shell), or "
                 "`torch.multiprocessing.set_sharing_strategy('file_system')`; "
                 "`nccl-workbook doctor` checks workers x ranks against the limit."),
            score=0.95 if ranks or not timeouts else 0.85,
            culprit_ranks=ranks,
            evidence_lines=_lines(fd),
        ))

    # -- data loader --------------------------------------------------------------------------
    dl = _of(events, EventKind.DATALOADER_TIMEOUT, EventKind.DATALOADER_WORKER_DIED)
    if dl:
        ranks = _ranks(dl)
        before = first_wait_line is None or dl[0].line_no <= first_wait_line
        died = [e for e in dl if e.kind is EventKind.DATALOADER_WORKER_DIED]
        how = (f"a DataLoader worker died ({died[0].detail})" if died
               else f"the DataLoader timed out ({dl[0].timeout_ms // 1000 if dl[0].timeout_ms else '?'} s)")
        killed = any("Killed" in e.detail for e in died)
        others = tuple(r for r in waiting_ranks if r not in ranks)
        reason = f"On {_who(ranks)} {how} (line {dl[0].line_no})"
        if others:
            reason += (f"{' before' if before else ', and'} the other ranks ({_fmt(others)}) timed out waiting: "
                       "that rank stalled in its input pipeline, not in the collective")
        reason += "."
        if killed:
            reason += " 'Killed' usually means the host's out-of-memory killer."
        out.append(Finding(
            title="Input pipeline stalled on one rank",
            scenario="dataloader-stall",
            reason=reason,
            fix=("Give the DataLoader a `timeout=` well below the process-group timeout so the stall is "
                 "reported as a DataLoader error on the rank that has it; find the slow or dead worker "
                 "(memory, a hung file read); keep worker count and prefetch within the host's memory."),
            score=0.9 if before else 0.7,
            culprit_ranks=ranks,
            evidence_lines=_lines(dl),
        ))

    # -- collective mismatch --------------------------------------------------------------
    mism = _of(events, EventKind.COLLECTIVE_MISMATCH)
    if mism:
        reporters = _ranks(mism)
        shapes: dict[int, str] = {}
        for e in mism:
            if e.rank is not None:
                shapes[e.rank] = f"{e.op_type} {e.detail.split(';')[0]}"
        counts: dict[str, list[int]] = {}
        for rank, key in shapes.items():
            counts.setdefault(key, []).append(rank)
        odd: tuple[int, ...] = ()
        if len(counts) > 1:
            sizes = sorted(len(v) for v in counts.values())
            if sizes[0] < sizes[-1]:
                odd = tuple(sorted(next(v for v in counts.values() if len(v) == sizes[0])))
        named = tuple(sorted({r for e in mism for r in e.named_ranks}))
        culprits = odd or tuple(sorted(set(reporters) | set(named)))
        decide = ("the odd one out is " + _who(odd)) if odd else (
            "with two sides the log cannot tell which one is wrong")
        out.append(Finding(
            title="Ranks called different collectives",
            scenario="collective-mismatch",
            reason=(f"A collective mismatch was reported (line {mism[0].line_no}): {mism[0].detail or mism[0].op_type}. "
                    f"Ranks disagree on the op, order or shapes of a collective; {decide}."),
            fix=("Make every rank call the same collectives in the same order with the same shapes "
                 "(no rank-dependent `if` around a collective, pad per-rank tensors); keep "
                 "TORCH_DISTRIBUTED_DEBUG=DETAIL on while debugging so a mismatch fails at once."),
            score=0.95,
            culprit_ranks=culprits,
            evidence_lines=_lines(mism),
        ))
    else:
        # timeouts whose ranks disagree on the op or size at the same sequence number
        by_seq: dict[tuple[int | None, int], set[tuple[str | None, int | None]]] = {}
        for e in timeouts:
            if e.seq_num is not None:
                by_seq.setdefault((e.pg_id, e.seq_num), set()).add((e.op_type, e.numel_in))
        clash = [(key, v) for key, v in by_seq.items() if len({op_ for op_, _ in v}) > 1]
        if clash:
            (pg, seq), variants = clash[0]
            out.append(Finding(
                title="Ranks timed out in different collectives at the same step",
                scenario="collective-mismatch",
                reason=(f"At SeqNum {seq} the ranks report different ops ({', '.join(sorted(str(o) for o, _ in variants))}): "
                        "their sequences of collectives diverged."),
                fix="Make every rank issue the same collectives in the same order; run once with TORCH_DISTRIBUTED_DEBUG=DETAIL.",
                score=0.7,
                evidence_lines=_lines(timeouts),
            ))

    # -- unused parameters ----------------------------------------------------------------
    unused = _of(events, EventKind.UNUSED_PARAMETERS)
    if unused:
        ranks = tuple(sorted({r for e in unused for r in e.named_ranks} or set(_ranks(unused))))
        out.append(Finding(
            title="DDP: some parameters got no gradient",
            scenario="unused-parameters",
            reason=(f"DDP reported that reduction did not finish in the prior iteration (line {unused[0].line_no}): "
                    "a parameter took no part in the loss on " + _who(ranks) + ", so its gradient bucket "
                    "was never all-reduced there."),
            fix=("Make every parameter take part in the loss on every rank, or wrap with "
                 "`DistributedDataParallel(..., find_unused_parameters=True)` (slower), or "
                 "`static_graph=True` when the unused set never changes."),
            score=0.95,
            culprit_ranks=ranks,
            evidence_lines=_lines(unused),
        ))

    # -- an exception / CUDA error on one rank ----------------------------------------------
    raised = _of(events, EventKind.PYTHON_EXCEPTION, EventKind.CUDA_ERROR)
    if raised:
        ranks = _ranks(raised)
        first = raised[0]
        victims = tuple(r for r in waiting_ranks if r not in ranks)
        before = first_wait_line is None or first.line_no <= first_wait_line
        score = 0.9 if (victims and before) else 0.75 if victims else 0.6
        if not ranks:
            score -= 0.15
        reason = f"{_who(ranks).capitalize()} raised {first.detail} (line {first.line_no})"
        if victims:
            reason += (f"; ranks {_fmt(victims)} then waited in a collective for it" if len(victims) > 1
                       else f"; rank {victims[0]} then waited in a collective for it")
            reason += " (with NCCL they wait for the whole timeout; with gloo they see the connection close)"
        reason += "."
        out.append(Finding(
            title="An exception on one rank left the others waiting",
            scenario="exception-on-one-rank",
            reason=reason,
            fix=("Fix the exception itself; and make a failing rank fail the job fast: catch it, log it, and "
                 "call `dist.destroy_process_group()` (or abort) in a `finally`, so the other ranks do not "
                 "sit in the collective until the timeout."),
            score=score,
            culprit_ranks=ranks,
            evidence_lines=_lines(raised),
        ))

    # -- peers that closed (gloo) without any exception in the log --------------------------
    closed = _of(events, EventKind.PEER_CLOSED)
    if closed and not raised and not dl and not fd:
        culprits = tuple(r for r in late if r not in _ranks(closed))
        out.append(Finding(
            title="A peer process went away",
            scenario="exception-on-one-rank",
            reason=(f"{_who(_ranks(closed)).capitalize()} saw the connection to a peer close (line {closed[0].line_no}): "
                    f"{closed[0].detail}. The peer exited or destroyed its group"
                    + (f"; the silent/behind rank(s) {_fmt(culprits)} are the likely peer" if culprits else "")
                    + ". Its own output (not in this log, or above the first error) says why."),
            fix="Find the first rank that failed and why (its traceback, `dmesg` for an OOM kill); see notebook 03 for failing fast.",
            score=0.55 if culprits else 0.4,
            culprit_ranks=culprits,
            evidence_lines=_lines(closed),
        ))

    # -- store / rendezvous ------------------------------------------------------------------
    store = _of(events, EventKind.STORE_TIMEOUT)
    if store:
        joined = next((e for e in store if e.world_size is not None), None)
        if joined is not None:
            reason = (f"The store timed out with {joined.detail} (line {joined.line_no}): "
                      f"{_missing_clients(joined)} never connected. A rank that never started (a node that did "
                      "not launch, a crash at import, a wrong MASTER_ADDR/PORT or world size) keeps everyone at "
                      "the rendezvous.")
        else:
            reason = (f"{_who(_ranks(store)).capitalize()} timed out talking to the TCPStore ({store[0].detail}, line "
                      f"{store[0].line_no}): the master was unreachable or a peer never arrived.")
        out.append(Finding(
            title="A rank never joined the rendezvous",
            scenario=None,
            reason=reason,
            fix=("Check that every node ran the launcher with the same world size and MASTER_ADDR/MASTER_PORT, "
                 "that the port is reachable (`nc -zv host port`), and the first failure on the missing node; "
                 "a stale process from a previous run can also hold the port."),
            score=0.85,
            culprit_ranks=_ranks(store) if joined is None else (),
            evidence_lines=_lines(store),
        ))

    # -- NCCL / duplicate GPU -------------------------------------------------------------------
    dup = _of(events, EventKind.DUPLICATE_GPU)
    if dup:
        out.append(Finding(
            title="Two ranks on one GPU",
            scenario=None,
            reason=(f"NCCL refused the communicator: {dup[0].detail} (line {dup[0].line_no}). NCCL needs one GPU per rank."),
            fix=("Call `torch.cuda.set_device(local_rank)` before `init_process_group` (or pass `device_id=`), "
                 "and check CUDA_VISIBLE_DEVICES / the launcher's GPU binding."),
            score=0.95,
            culprit_ranks=tuple(sorted({r for e in dup for r in ((e.rank,) if e.rank is not None else ()) + e.named_ranks})),
            evidence_lines=_lines(dup),
        ))
    nccl = _of(events, EventKind.NCCL_ERROR)
    if nccl and not dup:
        remote = any("Remote" in e.detail or "remote process" in e.detail for e in nccl)
        out.append(Finding(
            title="NCCL reported an error",
            scenario=None,
            reason=(f"{_who(_ranks(nccl)).capitalize()}: {nccl[0].detail} (line {nccl[0].line_no})."
                    + (" A remote error means a peer process died or the network failed: the first rank to fail "
                       "elsewhere in the log (or on another node) is the one to read." if remote else
                       " This is a system/network/driver problem rather than a training-code hang.")),
            fix=("Run with NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) to see the failing call; check the network "
                 "interfaces (NCCL_SOCKET_IFNAME), InfiniBand health and driver/NCCL versions; "
                 "an OOM-killed peer shows up as a remote error."),
            score=0.7 if not timeouts else 0.55,
            culprit_ranks=_ranks(nccl),
            evidence_lines=_lines(nccl),
        ))

    # -- the classic: ranks waited for rank 0 ------------------------------------------------
    if timeouts and 0 in late and 0 not in waiting_ranks:
        small = numel is not None and numel <= _SCALAR_NUMEL
        is_barrier = op == "BARRIER"
        s01 = 0.75 if is_barrier else 0.65 if small else 0.45
        s02 = 0.35 if is_barrier else 0.6 if small else 0.35
        what = f"{op or 'a collective'}" + (f" (SeqNum {summary.failed_seq}" if summary.failed_seq is not None else "")
        what += (f", NumelIn={numel})" if numel is not None else ")" if summary.failed_seq is not None else "")
        base = (f"Ranks {_fmt(waiting_ranks)} timed out in {what} while rank 0 "
                + ("reported nothing" if 0 in summary.ranks_missing else "was behind")
                + f"{where}: rank 0 was somewhere else.")
        note = (" NCCL runs barrier() as a 1-element ALLREDUCE, so NumelIn=1 cannot tell a barrier from a scalar "
                "metric all-reduce." if small and not is_barrier else "")
        out.append(Finding(
            title="Rank 0 did extra work while the others waited",
            scenario="rank0-work-before-barrier",
            reason=base + " Typical: rank-0-only work (checkpoint, sample generation, evaluation) before a barrier "
                   "or collective the others already entered." + note,
            fix=("Keep rank-0-only work shorter than the timeout or make every rank wait outside collectives "
                 "(do the work on all ranks, or let the others proceed and sync later); a longer "
                 "`init_process_group(timeout=)` only hides it."),
            score=s01,
            culprit_ranks=(0,),
            evidence_lines=_lines(timeouts),
        ))
        out.append(Finding(
            title="A slow metric/logging step on rank 0",
            scenario="slow-metrics-on-rank0",
            reason=base + " A scalar all-reduce (loss, grad norm, metric) that rank 0 reaches late because it "
                   "computes or logs something slow (e.g. a norm over every parameter, wandb) fits too." + note,
            fix=("Compute metrics on every rank the same way and reduce them together; move slow logging off the "
                 "step (every N steps, async/offline logging)."),
            score=s02,
            culprit_ranks=(0,),
            evidence_lines=_lines(timeouts),
        ))

    # -- ALLGATHER with a missing / behind rank: uneven eval shards ------------------------------
    if timeouts and op in _ALLGATHER_OPS and late:
        sizes = {e.numel_in for e in timeouts if e.numel_in is not None}
        big = numel is not None and numel > 1_000_000
        score = 0.75 if len(sizes) > 1 else 0.4 if big else 0.6
        out.append(Finding(
            title="Uneven work before an all-gather (evaluation)",
            scenario="uneven-eval-allgather",
            reason=(f"Ranks {_fmt(waiting_ranks) or '?'} timed out in {op} while {_who(late)} did not join{where}. "
                    "In evaluation this is the signature of uneven shards: one rank has more batches (or an "
                    "extra step) and the others reach the gather first."
                    + (f" The ranks even disagree on the size ({', '.join(map(str, sorted(sizes)))} elements)."
                       if len(sizes) > 1 else "")
                    + (" (Large all-gathers are also FSDP's parameter gathers: check where it happened.)" if big else "")),
            fix=("Give every rank the same number of evaluation steps (DistributedSampler with drop_last/padding, "
                 "or `torch.distributed.algorithms.join.Join`), and gather padded tensors of equal size."),
            score=score,
            culprit_ranks=late,
            evidence_lines=_lines(timeouts),
        ))

    # -- one slow rank in gradient all-reduces ----------------------------------------------------
    if (timeouts and op == "ALLREDUCE" and numel is not None and numel >= _GRADIENT_NUMEL and late
            and 0 not in late and not raised and not dl and not fd):
        out.append(Finding(
            title="One rank much slower in the backward pass",
            scenario="slow-rank-dynamic-shapes",
            reason=(f"Ranks {_fmt(waiting_ranks)} timed out in a gradient-sized ALLREDUCE (NumelIn={numel}) while "
                    f"{_who(late)} did not get there{where}. With no error on that rank it was slow, not dead: "
                    "per-rank input sizes (sequence length, image size) that vary a lot make one rank's step "
                    "much longer."),
            fix=("Bucket or cap input sizes so every rank gets similar work per step; measure per-rank step "
                 "times (the tracer) to confirm; a longer timeout only hides it."),
            score=0.5,
            culprit_ranks=late,
            evidence_lines=_lines(timeouts),
        ))

    # -- the watchdog itself -------------------------------------------------------------------
    stuck = _of(events, EventKind.WATCHDOG_STUCK, EventKind.HEARTBEAT)
    if stuck:
        out.append(Finding(
            title="The NCCL watchdog itself was stuck",
            scenario="timeout-settings",
            reason=(f"{_who(_ranks(stuck)).capitalize()}: the heartbeat monitor saw no watchdog progress "
                    f"(line {stuck[0].line_no}; {stuck[0].detail}). A CUDA/NCCL call hung, or another thread held "
                    "the GIL; the process is then aborted after TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC."),
            fix=("Get stacks while it hangs (`py-spy dump --pid`), look for a rank stuck in a CUDA call or a "
                 "deadlock; raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only if the hang is real work."),
            score=0.5 if not timeouts else 0.35,
            culprit_ranks=_ranks(stuck),
            evidence_lines=_lines(stuck),
        ))
    pg_timeout = summary.timeout_ms
    dl_timeouts = [e.timeout_ms for e in _of(events, EventKind.DATALOADER_TIMEOUT) if e.timeout_ms]
    if pg_timeout and dl_timeouts and max(dl_timeouts) >= pg_timeout:
        out.append(Finding(
            title="DataLoader timeout not below the process-group timeout",
            scenario="timeout-settings",
            reason=(f"The DataLoader timeout ({max(dl_timeouts) // 1000} s) is not below the process-group timeout "
                    f"({pg_timeout // 1000} s): the collective times out first and blames the wrong place."),
            fix="Set `DataLoader(timeout=)` to well under `init_process_group(timeout=)`.",
            score=0.7,
            evidence_lines=_lines(_of(events, EventKind.DATALOADER_TIMEOUT)),
        ))
    slow_watch = [e for e in timeouts if e.ran_for_ms and e.timeout_ms and e.ran_for_ms > 3 * e.timeout_ms]
    if slow_watch:
        e = slow_watch[0]
        out.append(Finding(
            title="The timeout fired long after it expired",
            scenario="timeout-settings",
            reason=(f"Line {e.line_no}: the work ran {e.ran_for_ms // 1000} s against a {e.timeout_ms // 1000} s "
                    "timeout: the watchdog could not act for a long time (blocked, or error handling off)."),
            fix=("Leave TORCH_NCCL_ASYNC_ERROR_HANDLING at its default (3) and the heartbeat monitor on; "
                 "`nccl-workbook doctor` lists the settings in effect."),
            score=0.45,
            culprit_ranks=_ranks(slow_watch),
            evidence_lines=_lines(slow_watch),
        ))

    # -- torch itself names the late ranks (monitored barrier, desync report) ---------------------
    if summary.named_late and not any(f.scenario == "rank0-work-before-barrier" for f in out):
        named = _of(events, EventKind.MONITORED_BARRIER, EventKind.DESYNC_REPORT)
        first = named[0]
        source = ("rank 0's monitored_barrier" if first.kind is EventKind.MONITORED_BARRIER
                  else "the NCCL desync report (TORCH_NCCL_DESYNC_DEBUG)")
        out.append(Finding(
            title="torch named the late ranks",
            scenario=None,
            reason=(f"According to {source} (line {first.line_no}), {_who(summary.named_late)} did not arrive: "
                    f"{first.detail}. Those ranks were elsewhere when the others entered the collective."),
            fix="Look at what those ranks were doing at that point (their tracebacks, or `py-spy dump`).",
            score=0.8,
            culprit_ranks=summary.named_late,
            evidence_lines=_lines(named),
        ))

    # -- nothing decides ----------------------------------------------------------------------
    best = max((f.score for f in out), default=0.0)
    if waits and best < 0.5:
        everyone = not summary.ranks_missing and not summary.ranks_behind
        reason = (f"{_who(waiting_ranks).capitalize()} reported waiting in {op or 'a collective'}"
                  + (f" (SeqNum {summary.failed_seq})" if summary.failed_seq is not None else ""))
        if everyone:
            reason += (", no rank is missing and none is behind by its watchdog status: the log cannot decide "
                       "which rank was late (or whether the network stalled).")
        else:
            reason += (f"; {_who(late)} did not report{where}, but nothing in the log says why: the log cannot "
                       "decide between a hang, a slow rank and a crash on that rank.")
        out.append(Finding(
            title="The log cannot decide",
            scenario=None,
            reason=reason,
            fix=("Collect the missing evidence on the next run: the output of every rank (torchrun --tee 3 or "
                 "per-rank log files), flight-recorder dumps (TORCH_FR_BUFFER_SIZE, TORCH_FR_DUMP_TEMP_FILE; "
                 "analyse with torchfrtrace), `py-spy dump` of each rank while it hangs, and "
                 "`dist.monitored_barrier(wait_all_ranks=True)` on a gloo group before the failing step."),
            score=0.3,
            culprit_ranks=late,
            evidence_lines=_lines(waits),
        ))
    if waits and not any(f.scenario == "timeout-settings" for f in out):
        out.append(Finding(
            title="What the timeout setting can and cannot do",
            scenario="timeout-settings",
            reason=("A process-group timeout fired" + (f" ({pg_timeout // 1000} s)" if pg_timeout else "")
                    + ". If the late rank was only slow, the timeout was shorter than that phase; if it was stuck, "
                    "no timeout helps. NCCL has no NCCL_TIMEOUT: only `init_process_group(timeout=)` sets it."),
            fix="Set the timeout with `init_process_group(timeout=timedelta(...))`; fix the late rank first.",
            score=0.2,
            evidence_lines=_lines(waits, 1),
        ))
    if not out:
        if not events:
            reason = ("No known failure message was found in this log (it may be empty, binary, or from a rank that "
                      "did not fail).")
        else:
            reason = ("Messages were recognised but none of them is a failure (only status or launcher lines): the "
                      "log cannot decide what went wrong.")
        out.append(Finding(
            title="Nothing to go on",
            scenario=None,
            reason=reason,
            fix="Triage the output of every rank (torchrun --tee 3, or one file per rank concatenated).",
            score=0.1,
        ))
    out.sort(key=lambda f: -f.score)
    return out


def _missing_clients(event: Event) -> str:
    try:
        joined, expected = (int(x) for x in event.detail.split()[0].split("/"))
    except (ValueError, IndexError):
        return "some ranks"
    n = expected - joined
    return f"{n} of {expected} ranks" if n != 1 else f"1 of {expected} ranks"
