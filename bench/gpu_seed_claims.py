"""Two seeds' GPU claims, measured on a GPU (the notebooks 02 and 09 measure them on CPU).

    python bench/gpu_seed_claims.py [--json OUT.json] [--reps 20]

- Seed 004 (notebook 02) replaced stacked per-parameter norms with a loop that copies every
  gradient and parameter to the CPU (``.cpu()`` per parameter). Here the three ways of computing the
  gradient and parameter norms of the scenario (``NORM_METHODS``: ``stacked``, the seed's ``cpu-loop``,
  the package's ``fused`` = ``fixes.total_norms``) run on GPT-2 small (124 M parameters, built from
  its config, random weights, after one real backward) and on the scenario's small model, on the GPU:
  median time per call (ms, interleaved, each call ends in ``.item()``, which waits for the GPU) and
  host synchronisations per call, counted by ``torch.cuda.set_sync_debug_mode("warn")``.
- Seed 003 (notebook 09) blamed ``.expand()`` for corrupt gradients and switched to ``.repeat()``. The
  scenario's concept encoder runs with each on the same weights and inputs on the GPU: are the
  gradients bitwise identical, and the forward+backward time (ms, median, interleaved).

Not a test: it prints tables. Where it ran is in README ("What was tested where").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def host_syncs(fn: Any) -> int:
    """Synchronising CUDA calls ``fn`` makes (each ``.item()``, each ``.cpu()`` of a GPU tensor, …)."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def gpt2_small(device: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    import torch

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).to(device)
    tokens = torch.randint(0, 50257, (4, 256), device=device)
    model(tokens, labels=tokens).loss.backward()
    return model


def small_model(device: Any) -> Any:
    import torch

    from nccl_workbook.scenarios.slow_metrics_on_rank0 import make_model

    model = make_model(64, 8).to(device)
    x = torch.randn(16, 64, device=device)
    (model(x) - x).pow(2).mean().backward()
    return model


def norms_table(model: Any, name: str, reps: int) -> list[dict[str, Any]]:
    import torch

    from nccl_workbook.scenarios.slow_metrics_on_rank0 import NORM_METHODS

    params = list(model.parameters())
    times: dict[str, list[float]] = {m: [] for m in NORM_METHODS}
    values = {m: fn(params) for m, fn in NORM_METHODS.items()}  # warm-up, and the values
    syncs = {m: host_syncs(lambda fn=fn: fn(params)) for m, fn in NORM_METHODS.items()}
    for _ in range(reps):
        for m, fn in NORM_METHODS.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn(params)  # ends in .item(): the time includes the GPU work
            times[m].append((time.perf_counter() - t0) * 1e3)
    n = sum(p.numel() for p in params)
    return [{"model": name, "parameters_M": round(n / 1e6, 1), "tensors": len(params), "method": m,
             "ms_per_call": round(statistics.median(times[m]), 3), "host_syncs": syncs[m],
             "grad_norm": round(values[m][0], 5), "param_norm": round(values[m][1], 3)} for m in NORM_METHODS]


def expand_repeat(device: Any, batch: int, length: int, reps: int) -> dict[str, Any]:
    import torch

    from nccl_workbook.scenarios.slow_rank_dynamic_shapes import Params, _config, _loss, build_model

    params = Params()
    models = {m: build_model(_config(params, m), seed=params.seed).to(device) for m in ("expand", "repeat")}
    models["repeat"].load_state_dict(models["expand"].state_dict())
    g = torch.Generator().manual_seed(1234)
    tokens = torch.randint(1, params.vocab, (batch, length), generator=g)
    tokens[1:, length // 2:] = 0
    tokens = tokens.to(device)
    mask = tokens == 0
    times: dict[str, list[float]] = {"expand": [], "repeat": []}
    grads: dict[str, list[Any]] = {}
    for i in range(reps + 1):
        for mode, model in models.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            gs = torch.autograd.grad(_loss(model, tokens, mask), list(model.parameters()))
            torch.cuda.synchronize()
            if i:
                times[mode].append((time.perf_counter() - t0) * 1e3)
            grads[mode] = list(gs)
    diffs = [float((a - b).abs().max()) for a, b in zip(grads["expand"], grads["repeat"])]
    return {"batch": batch, "length": length,
            "grads_identical": all(torch.equal(a, b) for a, b in zip(grads["expand"], grads["repeat"])),
            "max_abs_grad_diff": max(diffs), "expand_ms": round(statistics.median(times["expand"]), 3),
            "repeat_ms": round(statistics.median(times["repeat"]), 3),
            "repeat_extra_MiB": round(batch * length * params.concepts * 4 / 2**20, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args(argv)
    import pandas as pd
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to measure (the CPU numbers are in notebooks 02 and 09)")
        return 1
    dev = torch.device("cuda", 0)
    meta = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "cuda": torch.version.cuda}
    print(f"on {meta['gpu']}, torch {meta['torch']} (CUDA {meta['cuda']})")
    norms = norms_table(small_model(dev), "scenario MLP (notebook 02)", a.reps)
    try:
        norms += norms_table(gpt2_small(dev), "GPT-2 small", a.reps)
    except ImportError as e:
        print(f"GPT-2 skipped: {e}")
    print("\nseed 004: gradient + parameter norms for logging, per call")
    print(pd.DataFrame(norms).to_string(index=False))
    er = [expand_repeat(dev, b, length, a.reps) for b, length in ((4, 512), (32, 512))]
    print("\nseed 003: .expand() vs .repeat() in the concept encoder, forward+backward")
    print(pd.DataFrame(er).to_string(index=False))
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "norms": norms, "expand_repeat": er}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
