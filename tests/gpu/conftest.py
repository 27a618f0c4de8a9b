"""The GPU tests: marked ``gpu`` and skipped, with the reason, where torch sees no CUDA device.

They ran on a one-GPU machine (README, "What was tested where"); CI has no GPU and skips them.
NCCL refuses two ranks on one GPU, so every NCCL group here has one rank.
"""

from __future__ import annotations

import pytest


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available() and torch.distributed.is_nccl_available()
    except Exception:  # noqa: BLE001
        return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = None if _has_cuda() else pytest.mark.skip(reason="needs a CUDA GPU and a torch built with NCCL")
    for item in items:
        if "/tests/gpu/" in str(item.path):
            item.add_marker(pytest.mark.gpu)
            if skip is not None:
                item.add_marker(skip)
