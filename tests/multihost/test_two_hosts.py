"""Multi-host behaviour on two network-namespace hosts: a cluster with two Slurm-started engines on
each host, driven from ``nwb-b`` (the login node here), names rank 0 on ``nwb-a`` as the culprit;
the rendezvous and the hub are on the namespaces' own addresses; each run measures the clock offset
of the ranks on the other host; an engine on the other host is killed through its nanny and replaced
by a second Slurm job."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.multihost.hosts import SUBNET, TwoHosts
from tests.slurm.daemons import SlurmDaemons


def test_cluster_across_two_hosts_names_the_culprit_on_the_other_host(hosts: TwoHosts, slurm2: SlurmDaemons) -> None:
    env = {**os.environ, **slurm2.env, "PYTHONPATH": os.getcwd()}
    proc = subprocess.run([*hosts.prefix("nwb-b"), sys.executable, "-m", "tests.multihost.driver"],
                          capture_output=True, text=True, env=env, timeout=400)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout[-3000:], proc.stderr[-3000:], slurm2.logs())
    out = json.loads(lines[0][len("RESULT "):])
    # two engines per host, ranks by (host, local rank), local ranks from SLURM_LOCALID
    assert out["placement"] == {"0": ["nwb-a", 0, "slurm"], "1": ["nwb-a", 1, "slurm"],
                                "2": ["nwb-b", 0, "slurm"], "3": ["nwb-b", 1, "slurm"]}
    assert out["rank_hosts"] == ["nwb-a", "nwb-a", "nwb-b", "nwb-b"]
    # the culprit, rank 0, runs on the host the client is not on; named live and after the run
    assert out["broken_culprits"] == [0] and out["hang_culprits"] == [0], out["broken_message"]
    assert out["fixed_ok"]
    assert out["hub_host"] == f"{SUBNET}.2"
    assert out["trace_ranks"] == [0, 1, 2, 3]
    # every run measured the offsets: zero for this host's ranks, a round trip for the others'
    # (one machine's clock: within a few ms)
    assert len(out["runs_clock_offsets_ns"]) == 2
    for offsets in out["runs_clock_offsets_ns"]:
        assert offsets["2"] == 0 and offsets["3"] == 0
        assert all(abs(offsets[r]) < 50_000_000 for r in ("0", "1")), offsets
    assert "through its nanny" in out["kill_note"], out["kill_note"]
    assert any("replacement" in n for n in out["heal_notes"]), out["heal_notes"]
    after = out["after_replacement"]
    assert after["culprits"] == [0] and len(after["job_ids"]) == 2, after
    assert sorted(after["hosts"]).count("nwb-a") + sorted(after["hosts"]).count("nwb-b") == 4
    by_host: dict[str, list[int]] = {}
    for host, lr in zip(after["hosts"], after["local_ranks"]):
        by_host.setdefault(host, []).append(lr)
    assert all(len(set(lrs)) == len(lrs) for lrs in by_host.values()), after  # one GPU index per rank of a host
    assert slurm2.jobs() == [], "stop() must cancel both jobs"
