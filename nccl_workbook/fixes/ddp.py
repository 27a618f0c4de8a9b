"""Fixes for DDP parameters that get no gradient on some ranks (seed 001, ``find_unused_parameters``).

The broken pattern: a data-dependent branch (an auxiliary head that only runs when the batch has
samples with an auxiliary label, a mixture-of-experts route, a skipped layer) leaves some
parameters out of the loss on *some* ranks, in *some* steps::

    main, aux = model(x, has_aux_label)       # aux is None when no sample has the label
    loss = main_loss(main) + (aux_loss(aux) if aux is not None else 0)
    loss.backward()

DDP all-reduces gradients in buckets and launches a bucket only when every parameter in it has its
gradient. On the rank that skipped the branch that bucket never becomes ready: it launches no
all-reduce for it, returns from ``backward()`` and raises at the next forward
(``Expected to have finished reduction in the prior iteration …``, measured on torch 2.13). The
other ranks did launch it and wait in that ALLREDUCE until the process-group timeout (under NCCL
they are not told that the skipping rank failed).

Three fixes (measured in notebook 07):

1. ``DistributedDataParallel(model, find_unused_parameters=True)``: DDP walks the autograd graph
   from the forward's outputs every step, marks what it did not reach as ready, and all-reduces a
   "which parameters were used" bitmap: one extra ALLREDUCE per step (numel = number of parameter
   tensors) on top of the gradient buckets. Nothing to import.
2. ``static_graph=True``: fixes it only when every rank's set of unused parameters is the same in
   every step (it may differ between ranks). When a rank's set changes from one step to another,
   as with a data-dependent branch, it fails the same way (with a clearer error on that rank).
3. :func:`use_all_parameters`: make every parameter take part in every step's loss with a zero
   weight, so that every rank produces every gradient (zeros where the branch was skipped). No
   graph walk, no extra collective.

To find the parameters before anything hangs, on every rank, call
:func:`parameters_not_in_graph` on the step's outputs (or set ``TORCH_DISTRIBUTED_DEBUG=INFO``,
which makes the error above name them; see notebook 07 for what ``DETAIL`` does on gloo).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["use_all_parameters", "parameters_not_in_graph"]


def use_all_parameters(loss: Any, *modules: Any) -> Any:
    """``loss`` plus zero times the sum of every trainable parameter of ``modules``.

    The value of the loss and every gradient that was already there are unchanged; parameters the
    step did not use get a zero gradient instead of none, so DDP's buckets become ready on every
    rank in every step. The cost is one ``sum`` per parameter tensor.

    Caveats: a parameter that holds ``inf``/``nan`` makes the loss ``nan`` (``0 * inf``); with
    momentum or weight decay a zero gradient still moves a parameter, where ``None`` would have
    left it alone (the same holds for ``find_unused_parameters=True``, whose all-reduce also gives
    zeros for parameters unused on one rank only).

    Example::

        main, aux = ddp_model(x, has_aux_label)
        loss = main_loss(main) + (aux_loss(aux) if aux is not None else 0)
        loss = use_all_parameters(loss, ddp_model.module)
        loss.backward()
    """
    if not modules:
        raise ValueError("use_all_parameters needs at least one module whose parameters should take part")
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    if not params:
        return loss
    total = params[0].sum()
    for p in params[1:]:
        total = total + p.sum()
    return loss + 0.0 * total


def parameters_not_in_graph(outputs: Any, module: Any) -> list[str]:
    """Names of ``module``'s trainable parameters that the autograd graph of ``outputs`` does not
    reach: the parameters that will get no gradient from ``outputs.backward()`` on this rank.

    ``outputs`` is a tensor or a (nested) list/tuple/dict of tensors (``None`` entries are skipped).
    Call it on every rank before ``backward()``: a rank that returns a non-empty list while the
    others return an empty one is the rank that will hang DDP's all-reduce.

    >>> import torch
    >>> net = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2), "b": torch.nn.Linear(2, 2)})
    >>> parameters_not_in_graph(net["a"](torch.ones(1, 2)).sum(), net)
    ['b.weight', 'b.bias']
    """
    reached: set[tuple[Any, ...]] = set()
    # holds every node visited: a node's Python wrapper lives only while referenced, and a dead
    # wrapper's id() can be reused by the next one, which would then look visited already
    seen: dict[int, Any] = {}
    stack = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]
    for t in _tensors(outputs):
        if t.grad_fn is None and t.requires_grad:
            reached.add(_key(t))  # a leaf output is itself reached
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen[id(fn)] = fn
        variable = getattr(fn, "variable", None)  # AccumulateGrad nodes hold the leaf
        if variable is not None:
            reached.add(_key(variable))
        stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return [name for name, p in module.named_parameters() if p.requires_grad and _key(p) not in reached]


def _key(t: Any) -> tuple[Any, ...]:
    """A parameter by its memory, not by its Python object (with DDP on CUDA, torch 2.11, the
    ``id()`` comparison found used parameters unused, differently from run to run)."""
    return (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))


def _tensors(obj: Any) -> Iterable[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)
