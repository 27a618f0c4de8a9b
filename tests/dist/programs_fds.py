"""Tiny rank programs for the fd-exhaustion dist tests (module-level: pickled by reference)."""

from __future__ import annotations

from typing import Any


def engine_state(ctx: Any, params: Any) -> dict[str, Any]:
    """What a run must leave as it found it on an engine: child processes (other than torch's
    shared-memory manager), the open-file limit, the sharing strategy."""
    import resource

    import psutil
    import torch.multiprocessing as tmp

    children = [c for c in psutil.Process().children(recursive=True) if c.name() != "torch_shm_manager"]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"children": len(children), "soft": soft, "hard": hard, "sharing": tmp.get_sharing_strategy()}
