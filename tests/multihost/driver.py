"""Run inside host ``nwb-b`` by tests/multihost: the notebook's side of a two-host cluster.

Starts a RankCluster whose 4 engines a Slurm job places on both hosts (2 per host, the job submitted
from here as from a login node), runs one scenario broken and fixed, and prints one JSON line with
what the test checks: placement, rank hosts, the run's clock offsets, culprits, verdicts.
"""

from __future__ import annotations

import json
import sys

from nccl_workbook.cluster import RankCluster
from nccl_workbook.launchers import SlurmEngines
from nccl_workbook.runner import run_scenario


def main() -> int:
    # record the offsets each run measured (the runner aligns the trace with them)
    measured: list[dict[int, int]] = []
    original = RankCluster.clock_offsets_ns

    def recording(self: RankCluster, world_size: int | None = None) -> dict[int, int]:
        offsets = original(self, world_size)
        measured.append(offsets)
        return offsets

    RankCluster.clock_offsets_ns = recording  # type: ignore[method-assign]
    cluster = RankCluster(n_ranks=4, engines=SlurmEngines(nodes=2, ntasks_per_node=2, start_timeout_s=120))
    try:
        cluster.start()
        broken = run_scenario(cluster, "rank0-work-before-barrier", "broken")
        fixed = run_scenario(cluster, "rank0-work-before-barrier", "shard-work")
        out = {
            "start_s": cluster.start_s,
            "placement": {r: [p.host, p.local_rank, p.source] for r, p in cluster.placement.items()},
            "rank_hosts": [o.host for o in broken.per_rank],
            "runs_clock_offsets_ns": [{str(k): v for k, v in m.items()} for m in measured],
            "trace_ranks": sorted(int(r) for r in broken.trace["rank"].unique()) if broken.trace is not None else [],
            "hub_host": cluster.progress_hub(local=False).host,
            "broken_culprits": list(broken.culprit_ranks),
            "broken_message": broken.diagnosis.message,
            "hang_culprits": list(broken.hang.culprit_ranks) if broken.hang is not None else None,
            "fixed_ok": fixed.ok,
            "job_ids": list(cluster.job_ids),
        }
        # an engine on the other host (rank 0, on nwb-a) killed through its nanny, replaced by a
        # second Slurm job before the next run, which is diagnosed right again
        out["kill_note"] = cluster.kill_engine(cluster.engine_ids[0], "test kill")
        out["heal_notes"] = cluster.ensure_healthy()
        again = run_scenario(cluster, "rank0-work-before-barrier", "broken")
        out["after_replacement"] = {"culprits": list(again.culprit_ranks), "job_ids": list(cluster.job_ids),
                                    "local_ranks": cluster.local_ranks(cluster.engine_ids),
                                    "hosts": [p.host for p in cluster.placement.values()]}
    finally:
        cluster.stop()
    print("RESULT " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
