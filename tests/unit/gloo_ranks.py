"""Two gloo ranks on CPU in spawned processes, for the tests that measure a torch mechanism the lint relies on."""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Callable
from pathlib import Path
from typing import Any


def run_two_ranks(target: Callable[..., None], tmp_path: Path, tag: str, *args: Any,
                  timeout_s: float = 60) -> dict[int, str]:
    """Run ``target(rank, init_method, *args, out)`` on ranks 0 and 1 and return what each put on ``out`` (``(rank,
    text)``); a rank that said nothing in ``timeout_s`` is left out. Both processes are gone on return."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    init = f"file://{tmp_path / f'store-{tag}'}"
    procs = [ctx.Process(target=target, args=(r, init, *args, out)) for r in range(2)]
    for p in procs:
        p.start()
    results: dict[int, str] = {}
    try:
        for _ in procs:
            rank, what = out.get(timeout=timeout_s)
            results[rank] = what
    except queue.Empty:
        pass
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
    return results
