"""Fixes for the workbook's scenarios, for use in your own training script.

Each function is documented with the incident it fixes and an example; all are tested on CPU
(gloo) by the workbook's test suite, and those that touch tensors or a process group ran on one GPU in
a 1-rank NCCL group (``tests/gpu/test_cuda_paths.py``; README, "What was tested where"). Import what you need::

    from nccl_workbook.fixes import new_side_group, wait_for_main, sharded

One module per theme; each module's ``__all__`` is re-exported here. To add fixes, write a module
in this folder with an ``__all__`` and add its name to ``_MODULES``.
"""

from __future__ import annotations

import importlib

_MODULES = (
    "rank0_work",
    "desync",
    "timeouts",
    "batching",
    "metrics",
    "failfast",
    "dataloader",
    "ddp",
    "fds",
    "uneven",
    "rendezvous",
)

__all__: list[str] = []
for _name in _MODULES:
    _mod = importlib.import_module(f"{__name__}.{_name}")
    for _sym in _mod.__all__:
        globals()[_sym] = getattr(_mod, _sym)
        __all__.append(_sym)
