"""Fixes for a collective mismatch (desync): ranks that call different collectives, or the same
collective with different shapes, at the same point of the program.

The broken pattern is control flow that depends on something only this rank knows::

    counts = torch.bincount(labels)          # length = largest label *in this rank's batch* + 1
    dist.all_reduce(counts)                  # ranks disagree on the size: hang, wrong sums or abort

    if (labels == RARE).any():               # a local condition picks the collective
        dist.all_gather(parts, counts)
    else:
        dist.all_reduce(counts)

Every rank must call the same collectives, in the same order, with the same shapes and dtypes.
Two ways to get there:

1. **Rank-independent control flow**: shapes and branches come from configuration, never from
   local data (``torch.bincount(labels, minlength=n_classes)``; no branch around a collective).
   Nothing to import: this is the fix to prefer.
2. **Agree first**: when a decision really depends on local data, turn it into a collective
   decision before acting on it: :func:`any_rank` / :func:`all_ranks` for a branch,
   ``max_across_ranks`` (from :mod:`nccl_workbook.fixes.uneven`) + :func:`pad_to` for a length.

And two detectors, for finding where a desync happens (they do not fix anything):

- :func:`check_same` compares a value (a shape, a key list, a branch taken) across ranks with one
  small ``all_gather_object`` and raises :class:`DesyncError` naming the odd ranks, on every rank.
- :func:`detail_group` creates a process group whose every collective is checked the way
  ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` checks them (torch's ``ProcessGroupWrapper``: op type, shapes,
  dtypes and devices are compared across ranks before each collective), without turning DETAIL on
  for the whole job. Setting ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` before ``init_process_group`` does
  the same for the default group. Neither checks the reduce op (SUM vs MAX) or what the data
  means: an all-reduce of the right shape but the wrong tensor passes every check.

All functions here are collectives: every rank of the group must call them, in the same order.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable, Iterator
from typing import Any

from nccl_workbook.fixes.uneven import max_across_ranks  # noqa: F401  (part of this module's story)

__all__ = [
    "DesyncError",
    "any_rank",
    "all_ranks",
    "pad_to",
    "check_same",
    "detail_group",
    "debug_level",
]


class DesyncError(RuntimeError):
    """Ranks disagree on something that must be the same on every rank.

    ``values`` maps rank -> the value it had; ``odd_ranks`` are the ranks outside the majority.
    """

    def __init__(self, name: str, values: dict[int, Any], odd_ranks: tuple[int, ...]) -> None:
        self.name = name
        self.values = values
        self.odd_ranks = odd_ranks
        shown = ", ".join(f"rank {r}: {v!r}" for r, v in sorted(values.items()))
        super().__init__(
            f"ranks disagree on {name}: rank(s) {', '.join(map(str, odd_ranks))} differ from the others "
            f"({shown}). Make the value rank-independent (from configuration, not from local data), "
            f"or agree on it first (any_rank / max_across_ranks)."
        )


def _flag_reduce(flag: bool, op_name: str, group: Any) -> bool:
    import torch
    import torch.distributed as dist

    from nccl_workbook.fixes._device import collective_device

    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=collective_device(group))
    dist.all_reduce(t, op=getattr(dist.ReduceOp, op_name), group=group)
    return bool(t.item())


def any_rank(flag: bool, *, group: Any = None) -> bool:
    """True on every rank if ``flag`` is true on at least one rank (an all-reduce MAX of one int).

    Example::

        saw_rare = bool((labels == RARE).any())
        if any_rank(saw_rare):                 # every rank takes the same branch
            dist.all_gather(parts, counts)
        else:
            dist.all_reduce(counts)
    """
    return _flag_reduce(flag, "MAX", group)


def all_ranks(flag: bool, *, group: Any = None) -> bool:
    """True on every rank if ``flag`` is true on every rank (an all-reduce MIN of one int).

    Example::

        if all_ranks(torch.isfinite(loss).item()):   # skip the step on every rank, or on none
            loss.backward(); opt.step()
    """
    return _flag_reduce(flag, "MIN", group)


def pad_to(tensor: Any, length: int, *, value: float = 0) -> Any:
    """``tensor`` (1-D) padded at the end with ``value`` to ``length`` elements. Local, no collective.

    >>> import torch
    >>> pad_to(torch.tensor([3, 1]), 4).tolist()
    [3, 1, 0, 0]
    """
    import torch

    if tensor.dim() != 1:
        raise ValueError(f"pad_to expects a 1-D tensor, got shape {tuple(tensor.shape)}")
    if length < tensor.numel():
        raise ValueError(f"cannot pad {tensor.numel()} elements to a shorter length {length}")
    out = torch.full((length,), value, dtype=tensor.dtype, device=tensor.device)
    out[: tensor.numel()] = tensor
    return out


def check_same(value: Hashable, name: str = "value", *, group: Any = None) -> None:
    """Raise :class:`DesyncError` on every rank unless ``value`` is equal on all ranks.

    One ``all_gather_object`` of ``value``: cheap for shapes, key lists, flags. Put it right before
    a collective whose shape or existence depends on local data, while looking for a desync.

    Example::

        check_same(tuple(counts.shape), "metrics shape")   # names the odd rank on every rank
        dist.all_reduce(counts)
    """
    import torch.distributed as dist

    world = dist.get_world_size(group)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, value, group=group)
    values = dict(enumerate(gathered))
    if len(set(values.values())) <= 1:
        return
    counts: dict[Any, int] = {}
    for v in values.values():
        counts[v] = counts.get(v, 0) + 1
    majority = max(counts, key=lambda v: (counts[v], -min(r for r, x in values.items() if x == v)))
    odd = tuple(sorted(r for r, v in values.items() if v != majority))
    raise DesyncError(name, values, odd)


_LEVELS = {"OFF", "INFO", "DETAIL"}


@contextlib.contextmanager
def debug_level(level: str) -> Iterator[None]:
    """Set ``TORCH_DISTRIBUTED_DEBUG`` to ``level`` for the block and apply it
    (``dist.set_debug_level_from_env()``; torch reads the variable only at import), then restore
    the previous value and level. Groups created inside the block keep the checks of ``level``.
    """
    import torch.distributed as dist

    level = level.upper()
    if level not in _LEVELS:
        raise ValueError(f"debug level must be one of {sorted(_LEVELS)}, got {level!r}")
    before = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    os.environ["TORCH_DISTRIBUTED_DEBUG"] = level
    dist.set_debug_level_from_env()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None)
        else:
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = before
        dist.set_debug_level_from_env()


def detail_group(ranks: list[int] | None = None, **new_group_kwargs: Any) -> Any:
    """A new process group whose collectives are checked across ranks as under
    ``TORCH_DISTRIBUTED_DEBUG=DETAIL``; the rest of the job keeps its own debug level.

    A mismatched collective on it raises ``RuntimeError: Detected mismatch between collectives on
    ranks. Rank 0 is running collective: CollectiveFingerPrint(... OpType=ALLREDUCE,
    TensorShape=[9] ...), but Rank 3 is running collective: ...`` on every rank, within
    milliseconds, instead of hanging or corrupting data. The cost: every collective on the group is
    preceded by a barrier and an all-gather of its fingerprint on a helper gloo group.

    Example::

        checked = detail_group()                     # every rank, right after init_process_group
        dist.all_reduce(metrics, group=checked)      # the collective you suspect
    """
    import torch.distributed as dist

    with debug_level("DETAIL"):
        return dist.new_group(ranks=ranks, **new_group_kwargs)
