"""Every scenario variant of the workbook on a 1-rank NCCL group (one GPU): which of them run there.

    python tests/gpu/scenarios_on_nccl.py [--json OUT]

Not a test: a 1-rank run cannot reproduce a late rank, so the broken variants do not fail the way
they do on 4 ranks. What it shows is whether each program's tensors and groups work on NCCL at all
(a CPU tensor in an NCCL collective raises). Prints one line per variant.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    from nccl_workbook.cluster import RankCluster
    from nccl_workbook.runner import result_from_run
    from nccl_workbook.scenarios import SCENARIOS

    rows = []
    with RankCluster(n_ranks=1, backend="auto") as c:
        print("backend:", c.backend, flush=True)
        for sid, sc in SCENARIOS.items():
            for v in sc.variant_names:
                spec, params = sc.variant(v), sc.params_for(v)
                pg = sc.timeout_for(v, sc.default_timeout_s, params)
                t = time.monotonic()
                try:
                    run = c.run(sc.program, params, pg_timeout_s=pg, world_size=1, deadline_s=sc.deadline_s(params, pg),
                                debug_level=spec.debug_level, init_group=sc.init_group)
                    r = result_from_run(run, scenario=sid, variant=v)
                    outcome, error = str(r.outcome.value), r.per_rank[0].error or ""
                except Exception as e:  # noqa: BLE001 - recorded
                    outcome, error = "exception", f"{type(e).__name__}: {e}"
                row = {"scenario": sid, "variant": v, "expect_ok": spec.expect_ok, "outcome": outcome,
                       "s": round(time.monotonic() - t, 1), "error": error[:300]}
                rows.append(row)
                print(f"{sid:26s} {v:22s} {outcome:9s} {row['s']:5.1f}s {error[:160]!r}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
