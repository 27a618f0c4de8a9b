"""Scenario ``init-rendezvous-timeout`` (issue 17): one rank reaches ``init_process_group`` long
after the others, and the others fail inside init, far from the cause.

What happens: a training script prepares its data shard (downloads, untars, tokenises) *before*
``init_process_group``, as many do on the node-local rank 0. On the node whose shard is not cached
yet that takes minutes; every other rank is already in ``init_process_group``, waiting in the
rendezvous under the init timeout (the group's ``timeout=``), and fails there. The errors name a
store key or a client count, not the rank that was late.

Here, scaled to seconds: 4 ranks, the group timeout is 3 s; rank ``late_rank`` (2: "the first rank
of the second node", 2 ranks per node) tokenises its shard for ``prepare_s`` = 6 s, the others for
0.2 s, then each calls ``init_process_group`` itself (the run skips its own init:
``Scenario.init_group=False``) with ``init_method`` ``tcp://`` (rank 0 hosts the TCPStore), then
three DDP steps and a final barrier.

What torch 2.13 gloo prints in ``broken`` (measured; the same with ``env://``, and with or without
``TORCH_DIST_INIT_BARRIER=1``: torch runs the store-based barrier only with it, after the backend
exists, and the gloo rendezvous before it fails first):

- rank 0 (hosts the store): ``DistStoreError: Timed out after 4 seconds waiting for clients. 3/4
  clients joined.``
- ranks 1 and 3: ``DistStoreError: wait timeout after 3000ms, keys: /default_pg/0//cpu//0/0`` (the
  key of rank 0's gloo address, which rank 0 never wrote: it was still waiting for clients)
- rank 2 (late): ``DistNetworkError: The client socket has timed out after 3000ms while trying to
  connect to (127.0.0.1, PORT)`` (the store went away with rank 0's failure).

Under torchrun (its agent hosts the store) the early ranks' key names the late rank instead:
``wait timeout after 3000ms, keys: /default_pg/0//cpu//0/2`` (``tests/data/logs/torch213/``).

The trace has no collective rows (init failed), so every rank records two regions:
``prepare_data`` and ``init_process_group``. :func:`never_arrived` names the rank whose init began
only after the others' init had already failed; :func:`init_table` shows it per rank.

Variants:

``broken``
    as above: every rank fails in init; rank 2 is the culprit.
``prepare-after-init``
    init first, on time, on every rank; then every rank prepares its shard and they meet at one
    barrier with a long timeout of its own (:func:`nccl_workbook.fixes.prepare_after_init`).
``long-init-then-short``
    init with a long timeout (``long_timeout_s``) so the late rank is waited for, one training step,
    then the group's timeout is set back to the short one for training
    (:func:`nccl_workbook.fixes.set_group_timeout`; the metrics show both values as the ranks read
    them back from torch).
``store-barrier``
    every rank meets first at a barrier on the TCPStore with its own long timeout
    (:func:`nccl_workbook.fixes.store_barrier`), then calls init with the short timeout.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.rendezvous import open_store, prepare_after_init, set_group_timeout, store_barrier
from nccl_workbook.fixes.timeouts import group_timeout_s
from nccl_workbook.scenarios._common import make_ddp, make_mlp, paced, train_steps
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "prepare_shard", "never_arrived", "init_table", "ResetProbe",
           "probe_timeout_reset", "timeout_reset_table"]

_INITS = {"plain", "after-init", "long-then-short", "store-barrier"}


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    #: the rank whose shard is slow to prepare
    late_rank: int = 2
    #: its preparation time (s); 2x the 3 s group timeout
    prepare_s: float = 6.0
    #: every other rank's preparation time (s)
    others_prepare_s: float = 0.2
    #: ``plain`` (prepare, then init: broken), ``after-init``, ``long-then-short`` or ``store-barrier``
    init: str = "plain"
    #: the one long timeout of each fix: the barrier after preparation, the init of
    #: ``long-then-short``, the store barrier (s)
    long_timeout_s: float = 20.0
    steps: int = 3
    dim: int = 64

    def __post_init__(self) -> None:
        if self.init not in _INITS:
            raise ValueError(f"init must be one of {sorted(_INITS)}, got {self.init!r}")
        if self.prepare_s < 0 or self.others_prepare_s < 0 or not self.long_timeout_s > 0:
            raise ValueError("need prepare_s >= 0, others_prepare_s >= 0 and long_timeout_s > 0")
        if self.late_rank < 0 or self.steps < 1:
            raise ValueError(f"need late_rank >= 0 and steps >= 1, got {self.late_rank}, {self.steps}")


def prepare_shard(ctx: Any, params: Params) -> int:
    """This rank's data preparation: tokenise a synthetic text shard (real hashing), paced to
    ``prepare_s`` on the late rank and ``others_prepare_s`` elsewhere. Returns the token count."""
    seconds = params.prepare_s if ctx.rank == params.late_rank % ctx.world_size else params.others_prepare_s

    def work() -> int:
        text = " ".join(f"rank{ctx.rank}-doc{i}-word{j}" for i in range(50) for j in range(20))
        return sum(1 for w in text.split() if hashlib.blake2s(w.encode(), digest_size=4).digest())

    with ctx.tracer.region("prepare_data"):
        return int(paced(seconds, work))


def _init(ctx: Any, timeout_s: float, store: Any = None) -> None:
    import torch.distributed as dist

    kwargs: dict[str, Any] = {"device_id": ctx.device} if ctx.backend == "nccl" else {}
    if store is None:
        kwargs["init_method"] = ctx.init_method
    else:
        kwargs["store"] = store
    world = dist.distributed_c10d._world
    count = world.group_count
    with ctx.tracer.region("init_process_group"):
        try:
            dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world_size,
                                    timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
        except BaseException:
            # torch 2.13 counts the group name up (default_pg/<n> in the store keys) even when init
            # fails (measured), and nothing counts it back: restore it, so that this engine's next
            # init uses the same name as a fresh engine's would
            world.group_count = count
            raise


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training script of the incident, one rank of it; it initialises the group itself."""
    import torch
    import torch.distributed as dist

    short_s = ctx.pg_timeout_s
    out: dict[str, Any] = {}
    if params.init == "plain":
        tokens = prepare_shard(ctx, params)
        _init(ctx, short_s)  # the early ranks wait in here for the late one
    elif params.init == "after-init":
        _init(ctx, short_s)
        tokens = prepare_after_init(prepare_shard, ctx, params, timeout_s=params.long_timeout_s)
    elif params.init == "long-then-short":
        tokens = prepare_shard(ctx, params)
        _init(ctx, params.long_timeout_s)
    else:  # store-barrier
        host, port = ctx.init_method.removeprefix("tcp://").rsplit(":", 1)
        store = open_store(host, int(port), rank=ctx.rank, world_size=ctx.world_size, timeout_s=params.long_timeout_s)
        tokens = prepare_shard(ctx, params)
        with ctx.tracer.region("store_barrier"):
            out["store_barrier_waited_s"] = round(store_barrier(store, rank=ctx.rank, world_size=ctx.world_size,
                                                                timeout_s=params.long_timeout_s), 3)
        _init(ctx, short_s, store=store)
    out["timeout_at_init_s"] = group_timeout_s()
    ddp = make_ddp(ctx, make_mlp(params.dim))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    step = train_steps(ctx, ddp, opt, 1)
    if params.init == "long-then-short":
        set_group_timeout(short_s)  # the first step is done: from here on a hang is reported quickly
    out["timeout_training_s"] = group_timeout_s()
    step = train_steps(ctx, ddp, opt, params.steps - 1, first_step=step)
    dist.barrier()
    return {**out, "tokens": tokens, "steps": step}


SCENARIO = Scenario(
    id="init-rendezvous-timeout",
    title="One rank prepares its data before init_process_group; the others time out in the rendezvous",
    symptom="DistStoreError 'waiting for clients. 3/4 clients joined' / 'wait timeout ... keys: /default_pg/...' "
            "/ DistNetworkError 'client socket has timed out' on every rank, during init",
    seed="issue 17",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 2 tokenises its shard for 6 s before init; the others wait in init under the 3 s timeout",
                expect_ok=False),
        Variant("prepare-after-init", "init first on every rank, then prepare, then one barrier with a long timeout",
                params={"init": "after-init"}),
        Variant("long-init-then-short", "init with a long timeout, one step, then _set_pg_timeout back to the short one",
                params={"init": "long-then-short"}),
        Variant("store-barrier", "a barrier on the TCPStore with its own long timeout before init",
                params={"init": "store-barrier"}),
    ),
    expected_culprits=lambda p, ws: (p.late_rank % ws,),
    expected_op="INIT",
    notebook="11_init_rendezvous_timeout.ipynb",
    deadline_s=lambda p, t: 2 * p.prepare_s + 4 * t + 30,
    init_group=False,
)


# -- reading a run -------------------------------------------------------------------------------
def _regions(trace: pd.DataFrame, name: str) -> pd.DataFrame:
    return trace[(trace["kind"] == "region") & (trace["name"] == name)]


def never_arrived(trace: pd.DataFrame, world_size: int) -> tuple[int, ...]:
    """The ranks that did not reach ``init_process_group`` while the others waited there: no
    ``init_process_group`` region at all, or one that began only after the first other rank's init
    had already failed. Empty when no init failed. Pure: reads the regions of the trace frame.

    >>> import pandas as pd
    >>> from nccl_workbook.trace import TraceRow, trace_frame
    >>> rows = [TraceRow(rank=r, kind="region", name="init_process_group", t_enqueue_ns=t, t_start_ns=t,
    ...                  t_end_ns=t + 3_000_000_000, status="timeout") for r, t in [(0, 0), (1, 1), (2, 6_000_000_000)]]
    >>> never_arrived(trace_frame(rows), world_size=3)
    (2,)
    """
    inits = _regions(trace, "init_process_group")
    failed = inits[inits["status"] != "ok"]
    if len(failed) == 0:
        return ()
    started = {int(r): int(t) for r, t in zip(inits["rank"], inits["t_start_ns"])}
    late: set[int] = {r for r in range(world_size) if r not in started}
    for r, t in started.items():
        others = failed[(failed["rank"] != r) & failed["t_end_ns"].notna()]
        if len(others) and t >= int(others["t_end_ns"].min()):
            late.add(r)
    return tuple(sorted(late))


def init_table(result: RunResult) -> pd.DataFrame:
    """Per rank: how long it prepared its data (s), when it began ``init_process_group`` and when
    init ended (s after the first rank began init), how init ended, what the rank reported, and
    whether it is a rank that never arrived (:func:`never_arrived`)."""
    import pandas as pd

    from nccl_workbook.status import short_error

    tr = result.trace
    cols = ["prepare_s", "init_began_s", "init_ended_s", "init_status", "reported", "never_arrived"]
    if tr is None or len(tr) == 0:
        return pd.DataFrame(columns=cols).rename_axis("rank")
    prep, inits = _regions(tr, "prepare_data"), _regions(tr, "init_process_group")
    t0 = int(inits["t_start_ns"].min()) if len(inits) else None
    late = set(never_arrived(tr, result.world_size))
    errors: Mapping[int, str | None] = {o.rank: o.error for o in result.per_rank}

    def rel(t: Any) -> float | None:
        return None if t0 is None or pd.isna(t) else round((int(t) - t0) / 1e9, 2)

    rows = {}
    for r in range(result.world_size):
        p, i = prep[prep["rank"] == r], inits[inits["rank"] == r]
        rows[r] = {
            "prepare_s": round((int(p["t_end_ns"].iloc[0]) - int(p["t_start_ns"].iloc[0])) / 1e9, 2)
            if len(p) and pd.notna(p["t_end_ns"].iloc[0]) else None,
            "init_began_s": rel(i["t_start_ns"].iloc[0]) if len(i) else None,
            "init_ended_s": rel(i["t_end_ns"].iloc[0]) if len(i) else None,
            "init_status": str(i["status"].iloc[0]) if len(i) else "never began",
            "reported": short_error(errors.get(r) or "", 110),
            "never_arrived": r in late,
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=cols).rename_axis("rank")


# -- does setting the timeout again after init take effect? (measured live) ----------------------
@dataclass(frozen=True)
class ResetProbe:
    """Groups are created with ``long_s``; each way of shortening the timeout to ``short_s`` is then
    tested live: rank 0 arrives ``late_s`` late at a barrier and the others time how long they wait."""

    long_s: float = 20.0
    short_s: float = 1.0
    late_s: float = 2.5

    def __post_init__(self) -> None:
        if not 0 < self.short_s < self.late_s < self.long_s:
            raise ValueError(f"need 0 < short_s < late_s < long_s, got {self.short_s}, {self.late_s}, {self.long_s}")


#: (key, what the script does after init); the last one is applied to the default group itself
RESETS: tuple[tuple[str, str], ...] = (
    ("nothing", "nothing: the group keeps its init timeout"),
    ("default_pg_timeout", "distributed_c10d.default_pg_timeout = short (after the group exists)"),
    ("new_group", "a new group: new_group(timeout=short)"),
    ("set_pg_timeout", "distributed_c10d._set_pg_timeout(short, group)"),
    ("set_pg_timeout_default", "distributed_c10d._set_pg_timeout(short) on the default group"),
)


def probe_timeout_reset(ctx: Any, probe: ResetProbe) -> dict[str, Any]:
    """Rank program (run with ``pg_timeout_s=probe.long_s``): for each of :data:`RESETS`, the timeout
    the group reports afterwards and how long a barrier with a late rank 0 really waited. The default
    group is changed last: its timeout kills it."""
    import time

    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    short, out = datetime.timedelta(seconds=probe.short_s), {}
    for key, _ in RESETS:
        saved = c10d.default_pg_timeout
        try:
            group = None if key == "set_pg_timeout_default" else dist.new_group(
                timeout=short if key == "new_group" else datetime.timedelta(seconds=probe.long_s))
            if key == "default_pg_timeout":
                c10d.default_pg_timeout = short
            elif key.startswith("set_pg_timeout"):
                c10d._set_pg_timeout(short, group)
            out[f"{key}:reports_s"] = group_timeout_s(group)
            if ctx.is_main:
                time.sleep(probe.late_s)
            t0 = time.perf_counter()
            try:
                dist.barrier(group=group)
                out[f"{key}:ended"] = "ok"
            except RuntimeError as e:
                out[f"{key}:ended"] = type(e).__name__
            out[f"{key}:waited_s"] = round(time.perf_counter() - t0, 2)
        finally:
            c10d.default_pg_timeout = saved
        if group is not None:
            dist.barrier()  # back in step on the default group (a failed side group leaves it intact)
    return out


def timeout_reset_table(cluster: Any, probe: ResetProbe | None = None) -> pd.DataFrame:
    """Run :func:`probe_timeout_reset`; one row per way: the timeout the group reports afterwards
    (s), how long the waiting ranks waited for a rank ``late_s`` late (median, s), how it ended, and
    whether the short timeout took effect."""
    import statistics

    import pandas as pd

    probe = probe or ResetProbe()
    run = cluster.run(probe_timeout_reset, probe, pg_timeout_s=probe.long_s, deadline_s=len(RESETS) * (probe.late_s + 3) + 60)
    bad = [f"rank {r.rank}: {r.status.value} {r.error}" for r in run.reports if r.status.value != "ok"]
    if bad:
        raise RuntimeError("the timeout-reset probe failed on the engines: " + "; ".join(bad))
    waiting = [r.metrics for r in run.reports if r.rank != 0]
    rows = []
    for key, what in RESETS:
        waited = statistics.median(float(m[f"{key}:waited_s"]) for m in waiting)
        rows.append({
            "after init": what,
            "group reports (s)": float(waiting[0][f"{key}:reports_s"]),
            "others waited (s)": round(waited, 2),
            "ended": waiting[0][f"{key}:ended"],
            "short timeout took effect": waited < probe.late_s - 0.5 * (probe.late_s - probe.short_s),
        })
    return pd.DataFrame(rows).set_index("after init")
