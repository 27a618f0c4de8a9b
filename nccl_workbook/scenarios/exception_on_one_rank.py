"""Scenario ``exception-on-one-rank`` (seed 000 §3: no error handling; one rank raises mid-training).

What happens: one rank hits a corrupt sample and raises ``ValueError`` while decoding it. The other
ranks have already loaded their batches and are inside the next gradient all-reduce. Under NCCL
nobody tells them: they wait until the process-group timeout and then report a collective timeout
(``WorkNCCL(SeqNum=…, OpType=ALLREDUCE, …) ran for 600097 milliseconds``, seed 000's log line),
far from the real error. That happens when the failing process does not exit (it is stuck in its
error handling: a data-loader worker being joined, a non-daemon thread); when it does exit,
``torchrun`` stops the other ranks.

Here, on gloo, scaled to seconds: 6 DDP steps on 4 ranks; at step ``fail_step`` rank ``fail_rank``
decodes a truncated sample (``torch.frombuffer`` raises). Gloo would tell the peers at once if the
failing rank left its group (``Connection closed by peer``); to reproduce NCCL, the failing rank
stays in its error handling with its group open until its peers have timed out
(:func:`~nccl_workbook.scenarios._common.stay_like_nccl`; ``exit_seen_by_peers=True`` gives gloo's
own behaviour instead).

Endings (``ending``), i.e. what wraps the training on every rank:

``plain``
    seed 000 before its fix: ``try: train(); dist.barrier() finally: destroy_process_group()``.
``seed-000``
    seed 000's fix: a ``training_succeeded`` flag, the final barrier only on success, and
    ``time.sleep(2)`` before ``destroy_process_group()`` on failure "to give other ranks time to
    detect the error". The exception already skipped the barrier in ``plain``; the peers are stuck
    in the next all-reduce of training, which the flag does not touch; the sleep delays the
    failing rank's teardown, which is what (on gloo) frees the peers.
``fail-fast``
    :class:`nccl_workbook.fixes.FailFast` around the training loop, barrier only on success: the
    failing rank publishes its error in the store and leaves its group; every rank stops within a
    second naming rank ``fail_rank`` and its ``ValueError``. The rank program then plays the
    launcher: it records why it stopped (metrics ``stop_reason``, ``stopped_early``) and returns,
    so the run's outcome is ``ok`` (no rank hung or timed out) while the training did stop.

Variants: ``broken`` (``plain``) and ``fail-fast``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nccl_workbook.fixes.failfast import FailFast
from nccl_workbook.scenarios._common import make_ddp, make_mlp, rank_stop_frame, stay_like_nccl
from nccl_workbook.scenarios.base import Scenario, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from nccl_workbook.results import RunResult

__all__ = ["Params", "program", "SCENARIO", "decode_sample", "encoded_sample", "stop_frame", "detection_summary"]

ENDINGS = ("plain", "seed-000", "fail-fast")


@dataclass(frozen=True)
class Params:
    """Knobs of the rank program; the defaults are what the notebook and CI run."""

    steps: int = 6
    fail_rank: int = 2
    #: the step (0-based) whose batch holds the corrupt sample on ``fail_rank``
    fail_step: int = 3
    #: what wraps the training: "plain", "seed-000" or "fail-fast" (see the module docstring)
    ending: str = "plain"
    #: False: the failing rank keeps its group open until its peers timed out (NCCL's behaviour);
    #: True: it leaves at once, and gloo tells its peers (gloo's behaviour)
    exit_seen_by_peers: bool = False
    #: seed 000's ``time.sleep(2)`` before destroying the group after a failure
    seed_sleep_s: float = 2.0
    batch: int = 16
    dim: int = 64

    def __post_init__(self) -> None:
        if self.ending not in ENDINGS:
            raise ValueError(f"ending must be one of {ENDINGS}, got {self.ending!r}")
        if not 0 <= self.fail_step < self.steps:
            raise ValueError(f"need 0 <= fail_step < steps, got fail_step={self.fail_step}, steps={self.steps}")
        if self.fail_rank < 0 or self.seed_sleep_s < 0:
            raise ValueError("need fail_rank >= 0 and seed_sleep_s >= 0")


def encoded_sample(index: int, dim: int, *, corrupt: bool = False) -> bytes:
    """A stored sample: ``dim`` float32 values as raw bytes; a corrupt one lost its last 2 bytes."""
    import torch

    g = torch.Generator().manual_seed(index)
    raw = torch.randn(dim, generator=g).numpy().tobytes()
    return raw[:-2] if corrupt else raw


def decode_sample(index: int, raw: bytes) -> Any:
    """Bytes -> tensor. A truncated sample raises ``ValueError`` (from ``torch.frombuffer``)."""
    import torch

    try:
        return torch.frombuffer(bytearray(raw), dtype=torch.float32)
    except ValueError as e:
        raise ValueError(f"cannot decode sample {index}: {e}") from e


def _fail_rank(params: Params, world_size: int) -> int:
    return min(params.fail_rank, world_size - 1)


def _load_batch(ctx: Any, step: int, params: Params) -> Any:
    import torch

    bad = ctx.rank == _fail_rank(params, ctx.world_size) and step == params.fail_step
    first = (step * ctx.world_size + ctx.rank) * params.batch
    rows = []
    for j in range(params.batch):
        idx = first + j
        rows.append(decode_sample(idx, encoded_sample(idx, params.dim, corrupt=bad and j == params.batch // 2)))
    return torch.stack(rows)


def _train(ctx: Any, ddp: Any, opt: Any, params: Params, state: dict[str, Any]) -> None:
    for i in range(params.steps):
        with ctx.tracer.step(i):
            try:
                with ctx.tracer.region("load_batch"):
                    x = _load_batch(ctx, i, params)
            except Exception:
                state["failed_at_ns"] = time.time_ns()
                raise
            x = x.to(ctx.device)
            loss = (ddp(x) - x).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP's gradient ALLREDUCE: where the other ranks wait
            opt.step()
        state["steps"] = i + 1


def program(ctx: Any, params: Params) -> dict[str, Any]:
    """The training script of the incident, one rank of it, with the chosen ending."""
    import torch
    import torch.distributed as dist

    ddp = make_ddp(ctx, make_mlp(params.dim))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    state: dict[str, Any] = {"steps": 0, "failed_at_ns": None}

    def leave_like_the_backend() -> None:
        """The failing rank's exit as its peers see it: NCCL (not at all) or gloo (at once)."""
        if state["failed_at_ns"] is not None and not params.exit_seen_by_peers:
            stay_like_nccl(ctx.pg_timeout_s, state["failed_at_ns"])

    if params.ending == "plain":
        try:
            _train(ctx, ddp, opt, params, state)
            dist.barrier()
        except BaseException:
            leave_like_the_backend()
            raise
        return {"steps": state["steps"]}

    if params.ending == "seed-000":
        training_succeeded = False
        try:
            _train(ctx, ddp, opt, params, state)
            training_succeeded = True
            dist.barrier()
        finally:
            if dist.is_initialized():
                if not training_succeeded:
                    time.sleep(params.seed_sleep_s)  # "give other ranks time to detect the error"
                leave_like_the_backend()
                dist.destroy_process_group()
        return {"steps": state["steps"]}

    # fail-fast: the guard inside seed 000's barrier-on-success shape; this function is also the
    # launcher, which records why the rank stopped instead of crashing
    try:
        with FailFast():
            _train(ctx, ddp, opt, params, state)
        dist.barrier()
    except Exception as e:  # noqa: BLE001 - the launcher's job: stop cleanly, say why
        return {"steps": state["steps"], "stopped_early": True, "stop_reason": f"{type(e).__name__}: {e}"[:300],
                "stopped_at_ns": time.time_ns()}
    return {"steps": state["steps"], "stopped_early": False}


def stop_frame(result: RunResult) -> pd.DataFrame:
    """Per rank: when it stopped training, in seconds after the failing rank raised (from the
    trace), how, what it reported, and whether that names the failing rank's exception.

    The failing rank's raise is the end of its failed ``load_batch`` region; a rank stopped when
    its last step ended (its failed collective, or the guard's stop).
    """
    tr = result.trace
    failed = tr[(tr["kind"] == "region") & (tr["name"] == "load_batch") & (tr["status"] != "ok")] if tr is not None and len(tr) else None
    t_raise = int(failed["t_end_ns"].min()) if failed is not None and len(failed) else None
    fail_rank = int(failed["rank"].iloc[0]) if failed is not None and len(failed) else None

    def names(rank: int, text: str) -> bool:
        return fail_rank is not None and "ValueError" in text and (rank == fail_rank or f"rank {fail_rank}" in text)

    return rank_stop_frame(result, t_raise, cause_column="names_the_cause", names_cause=names)


def detection_summary(runs: Mapping[str, RunResult]) -> pd.DataFrame:
    """One row per labelled run: its outcome, when the last of the other ranks stopped (seconds
    after the failing rank raised: the time to detection), whether every rank's report names the
    failing rank's exception, and what the other ranks reported (the first one, shortened)."""
    import pandas as pd

    rows = {}
    for label, r in runs.items():
        f = stop_frame(r)
        failed = r.trace[(r.trace["kind"] == "region") & (r.trace["status"] != "ok")] if r.trace is not None else None
        culprit = int(failed["rank"].iloc[0]) if failed is not None and len(failed) else None
        others = f.drop(index=culprit, errors="ignore") if culprit is not None else f
        rows[label] = {
            "outcome": r.outcome.value,
            "others_stopped_after_s": float(others["stopped_after_s"].max()) if len(others) else float("nan"),
            "every_rank_names_the_cause": bool(f["names_the_cause"].all()),
            "the_others_reported": str(others["reported"].iloc[0]) if len(others) else "",
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("run")


SCENARIO = Scenario(
    id="exception-on-one-rank",
    title="One rank raises mid-training; the others wait in the next all-reduce",
    symptom="ALLREDUCE timeout on every rank but one; that rank's own error is elsewhere in the log (or lost)",
    seed="000 §3",
    program=program,
    params_type=Params,
    variants=(
        Variant("broken", "rank 2 raises on a corrupt sample and (like NCCL) its peers are not told: they time out",
                expect_ok=False),
        Variant("fail-fast", "FailFast guard: the failing rank publishes its error and leaves; every rank stops "
                "within a second naming it; barrier only on success", params={"ending": "fail-fast"}),
    ),
    expected_culprits=lambda p, ws: (_fail_rank(p, ws),),
    expected_op="ALLREDUCE",
    notebook="03_exception_on_one_rank.ipynb",
    deadline_s=lambda p, t: p.seed_sleep_s + 4 * t + 30,
)
