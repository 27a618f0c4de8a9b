"""Batch plans that keep ranks in step when sequence lengths vary (seed 003).

The broken pattern: each rank batches *its own* shard of the data, so the step in which one rank's
batch holds the long sequences costs that rank many times what the others' steps cost (attention
grows with the square of the padded length). The others finish their step and wait in DDP's
gradient all-reduce; when one such step outlasts the process-group timeout, they time out.

The fix is to plan batches for *all* ranks together, so that the batches that run in the same step
cost about the same, and every rank gets the same number of steps (an uneven count is a hang of its
own: the rank with an extra step waits in an all-reduce nobody else calls). Three plans:

- :func:`length_grouped`: sort the samples by length and give every rank, in every step, samples of
  similar length (a long step is long on every rank at once: nobody waits, the padding shrinks);
- :func:`token_budget`: cap every batch at ``max_tokens`` padded tokens (long sequences go in small
  batches, short ones in big batches), then put batches of similar cost in the same step;
- :func:`fixed_length`: cut every sequence into pieces of at most ``max_len`` and pad each to
  ``max_len``: every batch has the same shape and the same cost (long-range context beyond
  ``max_len`` is lost, and short sequences are padded).

:func:`contiguous_shards` is the broken baseline (each rank a contiguous block of the data,
batched in order). A plan is ``plan[rank][step] -> Batch`` (a tuple of :class:`Piece`); feed one
rank's list to a ``DataLoader`` as its ``batch_sampler`` (indices: ``[p.index for p in batch]``) or
slice ``p.start:p.start + p.length`` out of sample ``p.index`` for chunked plans.

Every function is deterministic given its arguments, so every rank computes the same plan without
any communication.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Piece",
    "Batch",
    "Plan",
    "padded_cost",
    "contiguous_shards",
    "length_grouped",
    "token_budget",
    "fixed_length",
    "step_costs",
]


@dataclass(frozen=True)
class Piece:
    """Tokens ``start:start + length`` of sample ``index`` (the whole sample unless it was chunked)."""

    index: int
    start: int
    length: int


Batch = tuple[Piece, ...]
#: ``plan[rank][step]``: the batch a rank runs in a step; every rank has the same number of steps
Plan = list[list[Batch]]


def padded_cost(batch: Batch, *, power: int = 2) -> int:
    """Cost of a padded batch: ``len(batch) * max_length ** power`` (``power=2``: the attention term,
    which dominates for long sequences; ``power=1``: padded tokens)."""
    return len(batch) * max((p.length for p in batch), default=0) ** power


def step_costs(plan: Plan, *, power: int = 2) -> list[list[int]]:
    """``costs[step][rank]``: the padded cost of every batch, step by step. The ratio of a step's
    largest to its smallest cost is how long the fastest rank waits for the slowest."""
    n_steps = len(plan[0]) if plan else 0
    return [[padded_cost(plan[r][s], power=power) for r in range(len(plan))] for s in range(n_steps)]


def _check(lengths: Sequence[int], world_size: int) -> None:
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if any(n < 1 for n in lengths):
        raise ValueError("every sequence needs at least one token")


def contiguous_shards(lengths: Sequence[int], world_size: int, batch_size: int) -> Plan:
    """The naive split (broken): rank ``r`` gets the ``r``-th contiguous block of the data and
    batches it in order; the remainder that does not fill a step on every rank is dropped.

    >>> [[[p.index for p in b] for b in rank] for rank in contiguous_shards([5] * 8, 2, 2)]
    [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    """
    _check(lengths, world_size)
    steps = len(lengths) // (world_size * batch_size)
    per_rank = steps * batch_size
    return [
        [tuple(Piece(i, 0, lengths[i]) for i in range(r * per_rank + s * batch_size, r * per_rank + (s + 1) * batch_size))
         for s in range(steps)]
        for r in range(world_size)
    ]


def _shuffled_steps(plan: Plan, seed: int | None) -> Plan:
    if seed is None or not plan:
        return plan
    order = list(range(len(plan[0])))
    random.Random(seed).shuffle(order)
    return [[rank[s] for s in order] for rank in plan]


def length_grouped(lengths: Sequence[int], world_size: int, batch_size: int, *, seed: int | None = 0) -> Plan:
    """Sort all samples by length (longest first), cut the order into steps of
    ``world_size * batch_size`` samples, and deal each step's samples round-robin, so that in every
    step all ranks get samples of similar length. The steps are then shuffled (``seed``; ``None``
    keeps longest first). Samples that do not fill a last step are dropped.

    >>> plan = length_grouped([900, 10, 20, 800, 30, 40, 700, 600], 2, 2, seed=None)
    >>> [[[p.length for p in b] for b in rank] for rank in plan]
    [[[900, 700], [40, 20]], [[800, 600], [30, 10]]]
    """
    _check(lengths, world_size)
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    per_step = world_size * batch_size
    steps = len(order) // per_step
    plan: Plan = [[] for _ in range(world_size)]
    for s in range(steps):
        chunk = order[s * per_step:(s + 1) * per_step]
        for r in range(world_size):
            plan[r].append(tuple(Piece(i, 0, lengths[i]) for i in chunk[r::world_size]))
    return _shuffled_steps(plan, seed)


def _chunks(index: int, length: int, max_len: int) -> list[Piece]:
    return [Piece(index, start, min(max_len, length - start)) for start in range(0, length, max_len)]


def _pad_to_multiple(batches: list[Batch], world_size: int) -> list[Batch]:
    """Repeat batches from the end (the cheapest, once sorted) until every rank gets as many."""
    missing = (-len(batches)) % world_size
    return batches + [batches[len(batches) - 1 - (i % len(batches))] for i in range(missing)]


def _deal(batches: list[Batch], world_size: int, seed: int | None) -> Plan:
    """Batches -> plan: sorted by cost (so a step's batches cost about the same), padded to a
    multiple of ``world_size`` by repeating the cheapest batches (as DistributedSampler pads),
    dealt one per rank per step, steps shuffled."""
    if not batches:
        return [[] for _ in range(world_size)]
    batches = _pad_to_multiple(sorted(batches, key=lambda b: (-padded_cost(b), b[0].index, b[0].start)), world_size)
    steps = len(batches) // world_size
    plan = [[batches[s * world_size + r] for s in range(steps)] for r in range(world_size)]
    return _shuffled_steps(plan, seed)


def token_budget(lengths: Sequence[int], world_size: int, max_tokens: int, *, seed: int | None = 0) -> Plan:
    """Batches of at most ``max_tokens`` padded tokens (``len(batch) * longest <= max_tokens``),
    filled longest first; a sequence longer than ``max_tokens`` is cut into pieces of ``max_tokens``.
    Batches of similar cost run in the same step; every rank gets the same number of steps.

    >>> plan = token_budget([100, 100, 400, 50, 50, 50, 50, 300], 2, 400, seed=None)
    >>> [[[p.length for p in b] for b in rank] for rank in plan]
    [[[400], [100, 100, 50, 50]], [[300], [50, 50]]]
    """
    _check(lengths, world_size)
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    pieces = [p for i, n in enumerate(lengths) for p in _chunks(i, n, max_tokens)]
    pieces.sort(key=lambda p: (-p.length, p.index, p.start))
    batches: list[Batch] = []
    current: list[Piece] = []
    for p in pieces:  # longest first: the first piece of a batch is its longest
        if current and (len(current) + 1) * current[0].length > max_tokens:
            batches.append(tuple(current))
            current = []
        current.append(p)
    if current:
        batches.append(tuple(current))
    return _deal(batches, world_size, seed)


def fixed_length(lengths: Sequence[int], world_size: int, batch_size: int, max_len: int, *,
                 seed: int | None = 0) -> Plan:
    """Cut every sequence into pieces of at most ``max_len`` tokens, in data order, and make
    batches of ``batch_size`` pieces; the caller pads every piece to ``max_len``, so every batch has
    the same shape and cost. Every rank gets the same number of steps (the last batches are
    repeated to fill the last step, as DistributedSampler pads).

    >>> plan = fixed_length([10, 25, 5], 2, 2, 10, seed=None)
    >>> [[[(p.index, p.start, p.length) for p in b] for b in rank] for rank in plan]
    [[[(0, 0, 10), (1, 0, 10)], [(2, 0, 5)]], [[(1, 10, 10), (1, 20, 5)], [(2, 0, 5)]]]
    """
    _check(lengths, world_size)
    if max_len < 1 or batch_size < 1:
        raise ValueError(f"need max_len >= 1 and batch_size >= 1, got {max_len}, {batch_size}")
    pieces = [p for i, n in enumerate(lengths) for p in _chunks(i, n, max_len)]
    batches = _pad_to_multiple([tuple(pieces[b:b + batch_size]) for b in range(0, len(pieces), batch_size)], world_size)
    steps = len(batches) // world_size
    plan = [[batches[s * world_size + r] for s in range(steps)] for r in range(world_size)]
    return _shuffled_steps(plan, seed)
