"""Your script on the workbook's cluster: run a training script file as torchrun would, one engine
per rank, with the tracer and live detection, and get the same :class:`~nccl_workbook.results.RunResult`
as a scenario (per-rank outcomes, stalls with stacks, the diagnosis, the trace for the plots).

On each engine :func:`script_program` sets what torchrun sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), ``sys.argv``, and runs the
file as ``__main__``; its own ``init_process_group()`` joins this run's rendezvous. If the script
gives ``init_process_group`` no ``timeout=``, the run's ``pg_timeout_s`` is used (torch's default
would be 30 minutes on gloo: the workbook scales incidents to seconds); a ``timeout=`` of its own
is kept. DDP's gradient all-reduce and optimizer steps are traced as under ``nccl-workbook watch``
(:mod:`nccl_workbook.watch.hooks`). ``sys.exit(0)`` is success; another exit code is an error.

Usage::

    cluster = RankCluster.start_or_attach(n_ranks=4)
    result = run_script(cluster, "train.py", ["--steps", "20"], world_size=4, pg_timeout_s=3)
    result.verdict_text(), result.hang, result.trace
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from nccl_workbook.cluster import RankCluster
    from nccl_workbook.results import RunResult

__all__ = ["ScriptParams", "script_program", "run_script", "example_script"]


@dataclass(frozen=True)
class ScriptParams:
    """A script file and its command-line arguments."""

    path: str
    args: tuple[str, ...] = ()
    #: the group timeout used when the script's init_process_group gives none (seconds)
    default_timeout_s: float = 3.0


def example_script() -> str:
    """The small DDP training script that ships with the package (faults planted by flag)."""
    from nccl_workbook.examples import train_ddp

    return str(Path(train_ddp.__file__))


def script_program(ctx: Any, params: ScriptParams) -> dict[str, Any]:
    """Run the script as one rank (see the module docstring)."""
    import datetime
    import runpy
    import sys

    import torch.distributed as dist

    from nccl_workbook.watch.hooks import mark_optimizer_steps, trace_ddp_gradients

    host, port = ctx.init_method.removeprefix("tcp://").rsplit(":", 1)
    env = {"RANK": str(ctx.rank), "WORLD_SIZE": str(ctx.world_size), "LOCAL_RANK": str(ctx.local_rank),
           "LOCAL_WORLD_SIZE": str(ctx.world_size), "MASTER_ADDR": host, "MASTER_PORT": port,
           "GROUP_RANK": "0", "ROLE_RANK": str(ctx.rank)}
    saved_env = {k: os.environ.get(k) for k in env}
    saved_argv = list(sys.argv)
    original_init = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("timeout") is None:
            kwargs["timeout"] = datetime.timedelta(seconds=params.default_timeout_s)
        return original_init(*args, **kwargs)

    undo = [trace_ddp_gradients(ctx.tracer), mark_optimizer_steps(ctx.tracer)]
    os.environ.update(env)
    sys.argv = [params.path, *params.args]
    dist.init_process_group = init_process_group
    code: int | str | None = 0
    try:
        runpy.run_path(params.path, run_name="__main__")
    except SystemExit as e:
        code = e.code
    finally:
        dist.init_process_group = original_init
        sys.argv = saved_argv
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for u in undo:
            u()
    if code not in (0, None):
        raise RuntimeError(f"the script exited with code {code}")
    return {"steps_marked": ctx.tracer.steps_done}


def run_script(cluster: RankCluster, path: str | os.PathLike[str], args: Sequence[str] | str = (), *,
               world_size: int | None = None, pg_timeout_s: float = 3.0, deadline_s: float | None = None,
               name: str | None = None, **run_options: Any) -> RunResult:
    """Run ``path`` with ``args`` (a list, or one string split like a shell) on ``world_size`` ranks
    of ``cluster``; see the module docstring. ``deadline_s``: the client-side limit (default: ten
    times the group timeout plus 60 s)."""
    from nccl_workbook.runner import result_from_run

    path = str(Path(path).resolve())
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such script: {path}")
    argv = tuple(shlex.split(args) if isinstance(args, str) else map(str, args))
    params = ScriptParams(path, argv, float(pg_timeout_s))
    run = cluster.run(script_program, params, pg_timeout_s=pg_timeout_s, world_size=world_size, init_group=False,
                      deadline_s=deadline_s if deadline_s is not None else 10 * pg_timeout_s + 60, **run_options)
    label = name or Path(path).name
    return result_from_run(run, scenario=label, variant=" ".join(argv) or "(no arguments)", ground_truth=False)
