"""Scenario ``timeout-settings`` (seeds 000, 001, 002, 004): a legitimately long operation (a checkpoint
save on rank 0) outlasts a short process-group timeout, and which of the seeds' settings would
have changed that.

What happened: jobs died with ``Watchdog caught collective operation timeout: WorkNCCL(…,
Timeout(ms)=600000)`` while one rank did something long and legitimate. The seeds' write-ups then
set, side by side, settings that work and settings that do nothing: ``NCCL_TIMEOUT`` (001, 003,
004), ``NCCL_TIMEOUT_MINUTES`` and ``torch.distributed.distributed_c10d._DEFAULT_PG_TIMEOUT = …``
(000), ``NCCL_ASYNC_ERROR_HANDLING`` / ``NCCL_BLOCKING_WAIT`` (000, 001, 003), and
``init_process_group(timeout=…)`` (000, 002).

Here, scaled to seconds: two DDP training steps, then rank 0 saves a checkpoint (a real
``torch.save`` of the model, paced to ``save_s`` = 4.8 s as on a slow shared file system) while
the other ranks wait at a barrier, then two more steps and a final barrier. The group timeout is 3 s.

Variants:

``broken``
    the others wait in ``dist.barrier()`` on the main group: they time out after 3 s; rank 0 is
    the culprit (it arrives 4.8 s late).
``init-timeout``
    the seeds' working fix: the group's timeout (``init_process_group(timeout=)``) raised to 3x
    the save. Every collective of the job now waits that long before a real hang is reported.
``barrier-timeout``
    only the one long wait gets a long timeout: ``dist.barrier(timeout=…)`` per call
    (:func:`nccl_workbook.fixes.wait_with_timeout`); the group keeps 3 s for everything else.
``side-group``
    the waiting ranks wait on a gloo side group created with ``new_group(timeout=…)``
    (:func:`nccl_workbook.fixes.new_side_group` + :func:`~nccl_workbook.fixes.wait_for_main`).

:func:`settings_table` measures every setting of the seeds on the engines: the timeout a group
created after the setting really gets (read from torch's objects, never waited for when it is
torch's 30-minute default) and, where that timeout is short, how long a barrier really waited.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.rank0_work import new_side_group, wait_for_main
from nccl_workbook.fixes.timeouts import group_timeout_s, timeout_from_env, wait_with_timeout
from nccl_workbook.scenarios._common import make_ddp, make_mlp, paced, train_steps
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.cluster import RankCluster

__all__ = ["Params", "program", "SCENARIO", "SETTINGS", "Setting", "ProbeParams", "probe_settings", "settings_table"]

_WAITS = {"main", "barrier-timeout", "side-group"}


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps_before: int = 2
    steps_after: int = 2
    #: how long rank 0's checkpoint save takes (s)
    save_s: float = 4.8
    #: ``main`` (barrier on the main group), ``barrier-timeout`` or ``side-group``
    wait: str = "main"
    #: the long timeout of the one wait, for ``barrier-timeout`` and ``side-group`` (s)
    wait_timeout_s: float = 30.0
    dim: int = 64

    def __post_init__(self) -> None:
        if self.wait not in _WAITS:
            raise ValueError(f"wait must be one of {sorted(_WAITS)}, got {self.wait!r}")
        if self.save_s < 0 or not self.wait_timeout_s > 0:
            raise ValueError("need save_s >= 0 and wait_timeout_s > 0")


def save_checkpoint(ctx: Any, model: Any, params: Params) -> int:
    """Rank 0's checkpoint: a real ``torch.save`` of the model (to memory), paced to ``save_s``."""
    import torch

    def work() -> int:
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        return buf.tell()

    with ctx.tracer.region("save_checkpoint"):
        return int(paced(params.save_s, work))


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training script of the incident, one rank of it."""
    import torch
    import torch.distributed as dist

    side = new_side_group(params.wait_timeout_s) if params.wait == "side-group" else None
    ddp = make_ddp(ctx, make_mlp(params.dim))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    step = train_steps(ctx, ddp, opt, params.steps_before)
    nbytes: int | None
    if params.wait == "main":
        nbytes = save_checkpoint(ctx, ddp.module, params) if ctx.is_main else None
        dist.barrier()  # the others wait here, on the main group's timeout
    elif params.wait == "barrier-timeout":
        nbytes = wait_with_timeout(save_checkpoint, ctx, ddp.module, params, timeout_s=params.wait_timeout_s)
    else:
        nbytes = wait_for_main(save_checkpoint, ctx, ddp.module, params, group=side)
    step = train_steps(ctx, ddp, opt, params.steps_after, first_step=step)
    dist.barrier()  # the end of training: everyone meets once more
    return {
        "checkpoint_bytes": nbytes or 0,
        "steps": step,
        "main_group_timeout_s": group_timeout_s(),
        "wait_timeout_s": params.wait_timeout_s if params.wait != "main" else group_timeout_s(),
    }


SCENARIO = Scenario(
    id="timeout-settings",
    title="A checkpoint save on rank 0 outlasts the group timeout; which settings change it",
    symptom="BARRIER/ALLREDUCE timeout on every rank but 0 while rank 0 saves a checkpoint",
    seed="000, 001, 002, 004",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 0 saves for 4.8 s; the others wait in barrier() under the 3 s group timeout",
                expect_ok=False),
        Variant("init-timeout", "the seeds' working fix: init_process_group(timeout=) raised to 3x the save",
                pg_timeout_s=lambda t, p: max(t, 3 * p.save_s)),
        Variant("barrier-timeout", "only the one wait gets a long timeout: dist.barrier(timeout=) per call",
                params={"wait": "barrier-timeout"}),
        Variant("side-group", "the waiting ranks wait on a gloo side group made with new_group(timeout=)",
                params={"wait": "side-group"}),
    ),
    expected_culprits=lambda p, ws: (0,),
    expected_op="BARRIER",
    notebook="10_timeout_settings.ipynb",
    deadline_s=lambda p, t: 2 * p.save_s + 4 * t + 30,
)


# -- measuring the settings ----------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """One timeout setting from the seeds, as a script would apply it before creating its group.

    ``env`` is set (and restored) around the group's creation; ``patch`` names an attribute of
    ``torch.distributed.distributed_c10d`` assigned ``short_s`` seconds (and restored);
    ``script_reads`` is an environment variable that the *script* turns into ``timeout=`` (seed 000's
    pattern); ``timeout_arg`` passes ``timeout=short_s`` to ``new_group`` directly.
    """

    name: str
    seed: str
    env: tuple[tuple[str, str], ...] = ()
    patch: str | None = None
    script_reads: str | None = None
    timeout_arg: bool = False


#: every setting the seeds used, plus the two that work and the private name that is really read
SETTINGS: tuple[Setting, ...] = (
    Setting("no setting (torch's default)", "-"),
    Setting("NCCL_TIMEOUT=1", "001, 003, 004", env=(("NCCL_TIMEOUT", "1"),)),
    Setting("NCCL_TIMEOUT_MINUTES=0.02, nobody reads it", "000 (the variable alone)",
            env=(("NCCL_TIMEOUT_MINUTES", "0.02"),)),
    Setting("NCCL_TIMEOUT_MINUTES=0.02, the script passes it to timeout=", "000 (its script)",
            env=(("NCCL_TIMEOUT_MINUTES", "0.02"),), script_reads="NCCL_TIMEOUT_MINUTES"),
    Setting("distributed_c10d._DEFAULT_PG_TIMEOUT = 1 s", "000", patch="_DEFAULT_PG_TIMEOUT"),
    Setting("NCCL_ASYNC_ERROR_HANDLING=1, NCCL_BLOCKING_WAIT=1", "000, 001, 003",
            env=(("NCCL_ASYNC_ERROR_HANDLING", "1"), ("NCCL_BLOCKING_WAIT", "1"))),
    Setting("TORCH_NCCL_ASYNC_ERROR_HANDLING=1, TORCH_NCCL_BLOCKING_WAIT=1", "(their current names)",
            env=(("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"), ("TORCH_NCCL_BLOCKING_WAIT", "1"))),
    Setting("new_group(timeout=1 s) / init_process_group(timeout=1 s)", "000, 002", timeout_arg=True),
    Setting("distributed_c10d.default_pg_timeout = 1 s (private, the name torch reads)", "-",
            patch="default_pg_timeout"),
)


@dataclass(frozen=True)
class ProbeParams:
    """How the settings are measured: each is applied with ``short_s`` where it takes a value; a
    group whose timeout is at most ``live_max_s`` is also tested live, with rank 0 arriving
    ``late_s`` late at a barrier."""

    short_s: float = 1.0
    late_s: float = 2.5
    live_max_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.short_s < self.late_s:
            raise ValueError(f"need 0 < short_s < late_s, got short_s={self.short_s}, late_s={self.late_s}")


@contextlib.contextmanager
def _applied(setting: Setting, short_s: float) -> Iterator[None]:
    import torch.distributed.distributed_c10d as c10d

    saved_env = {k: os.environ.get(k) for k, _ in setting.env}
    missing = object()
    saved_attr = getattr(c10d, setting.patch, missing) if setting.patch else missing
    try:
        for k, v in setting.env:
            os.environ[k] = v
        if setting.patch:
            setattr(c10d, setting.patch, datetime.timedelta(seconds=short_s))
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if setting.patch:
            if saved_attr is missing:
                delattr(c10d, setting.patch)
            else:
                setattr(c10d, setting.patch, saved_attr)


def _late_barrier(ctx: Any, late_s: float, call: Callable[[], None]) -> float | None:
    """Rank 0 arrives ``late_s`` late; the others call ``call`` and return how long they waited
    before it raised (None on rank 0, or if it did not raise)."""
    if ctx.is_main:
        time.sleep(late_s)
    t0 = time.perf_counter()
    try:
        call()
    except RuntimeError:
        return None if ctx.is_main else time.perf_counter() - t0
    return None


def probe_settings(ctx: Any, params: ProbeParams) -> dict[str, Any]:
    """Rank program: for every :data:`SETTINGS` entry, create a group the way a script would after
    applying it, read the group's timeout, and (when short) measure a barrier with a late rank 0 on
    it. Also measures ``dist.barrier(timeout=short_s)`` on a group with torch's default timeout.
    Every change to the environment or to torch's module is restored."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    out: dict[str, Any] = {"had__DEFAULT_PG_TIMEOUT": hasattr(c10d, "_DEFAULT_PG_TIMEOUT"),
                           "main_group_timeout_s": group_timeout_s()}
    for i, s in enumerate(SETTINGS):
        with _applied(s, params.short_s):
            kwargs: dict[str, Any] = {}
            if s.script_reads:
                kwargs["timeout"] = timeout_from_env(s.script_reads, 30.0, unit="minutes")
            elif s.timeout_arg:
                kwargs["timeout"] = datetime.timedelta(seconds=params.short_s)
            group = dist.new_group(**kwargs)
        effective = group_timeout_s(group)
        out[f"{i}:effective_s"] = effective
        if effective <= params.live_max_s:
            waited = _late_barrier(ctx, params.late_s, lambda g=group: dist.barrier(group=g))
            if waited is not None:
                out[f"{i}:waited_s"] = waited
        dist.barrier()  # back in step on the main group (a failed side group leaves it intact)
    group = dist.new_group()  # torch's default timeout; one call of it gets a short one
    out["per_call:effective_s"] = group_timeout_s(group)
    waited = _late_barrier(ctx, params.late_s, lambda: dist.barrier(group=group,
                                                                    timeout=datetime.timedelta(seconds=params.short_s)))
    if waited is not None:
        out["per_call:waited_s"] = waited
    dist.barrier()
    out["has__DEFAULT_PG_TIMEOUT_after"] = hasattr(c10d, "_DEFAULT_PG_TIMEOUT")
    return out


def settings_table(cluster: RankCluster, params: ProbeParams | None = None, *, pg_timeout_s: float = 20.0) -> pd.DataFrame:
    """Run :func:`probe_settings` on the cluster; one row per setting: the timeout a group created
    after it really has (s), the median wait of the waiting ranks when it was short enough to test
    live (s), and whether it changed torch's default at all."""
    import statistics

    import pandas as pd

    params = params or ProbeParams()
    run = cluster.run(probe_settings, params, pg_timeout_s=pg_timeout_s,
                      deadline_s=len(SETTINGS) * (params.late_s + 2) + 60)
    bad = [f"rank {r.rank}: {r.status.value} {r.error}" for r in run.reports if r.status.value != "ok"]
    if bad:
        raise RuntimeError("the settings probe failed on the engines: " + "; ".join(bad))
    m = {r.rank: r.metrics for r in run.reports}
    default_s = float(m[0]["0:effective_s"])
    rows = []
    keys = [(str(i), s.name, s.seed) for i, s in enumerate(SETTINGS)]
    keys.append(("per_call", "dist.barrier(timeout=1 s) on a group with the default timeout", "-"))
    for key, name, seed in keys:
        effective = float(m[0][f"{key}:effective_s"])
        waits = [float(v[f"{key}:waited_s"]) for v in m.values() if f"{key}:waited_s" in v]
        waited = round(statistics.median(waits), 2) if waits else None
        rows.append({
            "setting": name.replace("1 s", f"{params.short_s:g} s"),
            "seed": seed,
            "timeout of the group (s)": effective,
            "measured: the others waited (s)": waited,
            "changes the timeout": effective != default_s or (waited is not None and waited < default_s),
        })
    df = pd.DataFrame(rows).set_index("setting")
    df.attrs["had__DEFAULT_PG_TIMEOUT"] = bool(m[0]["had__DEFAULT_PG_TIMEOUT"])
    df.attrs["main_group_timeout_s"] = float(m[0]["main_group_timeout_s"])
    df.attrs["default_s"] = default_s
    return df
