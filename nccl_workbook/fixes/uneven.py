"""Fixes for evaluation shards of unequal length and a per-batch all-gather (seed 001, ALLGATHER).

The broken pattern: every rank evaluates its own shard of the test set and all-gathers each
batch's outputs, one ``all_gather`` per batch::

    for x, idx in loader:                      # 4 batches on some ranks, 3 on others
        dist.all_gather(outs, model(x))        # the ranks with a 4th batch wait here forever

When the shards have different lengths (a sampler that does not pad, like detectron2's
``InferenceSampler`` or ``indices[rank::world]``), the ranks with more batches call one
``all_gather`` more than the others. The ranks that finished early are somewhere else (computing
their metric, waiting on another group); the others wait in ALLGATHER until the timeout.

Fixes, all exact (every sample counted once):

1. equal shards: pad every rank's shard to the same length (``DistributedSampler(shuffle=False)``
   does this by repeating samples from the start), then drop the repeats after gathering with
   :func:`unique_by_index`. Without that last step the padded samples are counted twice.
2. agree on the number of steps first: :func:`max_across_ranks` on the local batch count; a rank
   that runs out contributes padding rows (index ``-1``) until the longest rank is done.
3. uneven inputs with torch's ``Join`` context manager: :class:`UnevenAllGather` shadows the
   all-gather on ranks that have run out, for as long as any rank still has batches.

Simplest of all when it fits in memory: gather once, after the loop (``all_gather_object`` of each
rank's list of outputs), which does not care how many batches each rank had.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["max_across_ranks", "unique_by_index", "UnevenAllGather", "PAD_INDEX"]

#: the sample index of a padding row
PAD_INDEX = -1


def max_across_ranks(n: int, *, group: Any = None) -> int:
    """The largest ``n`` over all ranks of ``group`` (one ALLREDUCE with MAX). Every rank calls it.

    Example (before an evaluation loop with a per-batch collective)::

        n_steps = max_across_ranks(len(loader))
        batches = iter(loader)
        for _ in range(n_steps):
            batch = next(batches, None)           # None once this rank's shard is done
            rows = pack(batch) if batch is not None else padding_rows()
            dist.all_gather(out, rows)
    """
    import torch
    import torch.distributed as dist

    from nccl_workbook.fixes._device import collective_device

    t = torch.tensor([int(n)], dtype=torch.int64, device=collective_device(group))
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return int(t.item())


def unique_by_index(rows: Any, *, index_column: int = 0) -> Any:
    """Rows (a 2-D tensor) whose ``index_column`` holds each row's sample index: padding rows
    (index :data:`PAD_INDEX`) dropped, and of rows with the same index only the first kept, sorted by
    index. This is what makes a padded evaluation exact.

    >>> import torch
    >>> unique_by_index(torch.tensor([[2, 7], [0, 5], [-1, 0], [2, 7], [1, 6]])).tolist()
    [[0, 5], [1, 6], [2, 7]]
    """
    import torch

    if rows.dim() != 2:
        raise ValueError(f"rows must be a 2-D tensor (one row per sample), got shape {tuple(rows.shape)}")
    idx = rows[:, index_column]
    keep = idx != PAD_INDEX
    rows, idx = rows[keep], idx[keep]
    if len(rows) == 0:
        return rows
    order = torch.argsort(idx, stable=True)
    rows, idx = rows[order], idx[order]
    first = torch.ones(len(idx), dtype=torch.bool, device=idx.device)
    first[1:] = idx[1:] != idx[:-1]
    return rows[first]


@functools.cache
def _join_classes() -> tuple[type, type]:
    """The Joinable class, defined on first use (this module is imported without torch)."""
    from torch.distributed.algorithms.join import Join, JoinHook, Joinable

    class _ShadowGather(JoinHook):
        def __init__(self, gatherer: Any) -> None:
            self.gatherer = gatherer

        def main_hook(self) -> None:
            self.gatherer._shadow()

    class _UnevenAllGather(Joinable):
        def __init__(self, shape: tuple[int, ...], *, dtype: Any = None, group: Any = None, device: Any = None) -> None:
            import torch
            import torch.distributed as dist

            super().__init__()
            self.shape = tuple(shape)
            self.dtype = dtype or torch.int64
            self.group = group if group is not None else dist.group.WORLD
            from nccl_workbook.fixes._device import collective_device

            self.device = device or collective_device(self.group)
            self.world_size = dist.get_world_size(self.group)
            self.shadow_calls = 0
            self.gathered: list[Any] = []

        def __call__(self, tensor: Any) -> list[Any]:
            import torch
            import torch.distributed as dist

            if tuple(tensor.shape) != self.shape:
                raise ValueError(f"UnevenAllGather was built for shape {self.shape}, got {tuple(tensor.shape)}; "
                                 f"pad every rank's rows to the same shape")
            work = Join.notify_join_context(self)
            out = [torch.empty(self.shape, dtype=self.dtype, device=self.device) for _ in range(self.world_size)]
            dist.all_gather(out, tensor.to(device=self.device, dtype=self.dtype), group=self.group)
            if work is not None:
                work.wait()
            self.gathered.extend(out)
            return out

        def _shadow(self) -> None:
            import torch
            import torch.distributed as dist

            pad = torch.full(self.shape, PAD_INDEX, dtype=self.dtype, device=self.device)
            out = [torch.empty_like(pad) for _ in range(self.world_size)]
            dist.all_gather(out, pad, group=self.group)
            self.gathered.extend(out)
            self.shadow_calls += 1

        def join_hook(self, **kwargs: Any) -> JoinHook:
            return _ShadowGather(self)

        @property
        def join_device(self) -> Any:
            return self.device

        @property
        def join_process_group(self) -> Any:
            return self.group

    return _UnevenAllGather, Join


def UnevenAllGather(shape: tuple[int, ...], *, dtype: Any = None, group: Any = None, device: Any = None) -> Any:  # noqa: N802
    """An all-gather of one fixed-shape tensor per step that works when ranks have different
    numbers of steps, inside ``torch.distributed.algorithms.Join``: once a rank has left the loop,
    it keeps answering the others' all-gathers with padding rows (every element
    :data:`PAD_INDEX`) until every rank is done. Costs one small ALLREDUCE per step (Join's "who
    is still running" count), on top of the all-gather.

    Returns a ``torch.distributed.algorithms.Joinable``; call it with this rank's tensor to get the
    list of every rank's tensors for this step. ``gathered`` holds every rank's tensors of every
    step, including the steps this rank answered with padding after it ran out (after the ``Join``
    block every rank has the same ``gathered``); ``shadow_calls`` counts those steps.

    Example::

        from torch.distributed.algorithms import Join
        gather = UnevenAllGather((batch_size, 3))
        with Join([gather]):
            for x, idx in loader:                   # uneven shards
                gather(pack(idx, model(x)))         # padded to batch_size rows, index -1 = padding
        rows = unique_by_index(torch.cat(gather.gathered))   # every sample once, on every rank
    """
    cls, _ = _join_classes()
    return cls(shape, dtype=dtype, group=group, device=device)
