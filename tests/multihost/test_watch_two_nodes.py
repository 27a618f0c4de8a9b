"""``nccl-workbook watch --hub-host ADDR`` around a two-node torchrun, one node per network-namespace
host: the watching process (on ``nwb-a``) hosts the hub on its namespace address, the ranks of the
node on ``nwb-b`` publish to it over the veth pair, and the late rank on ``nwb-b`` is named live."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from nccl_workbook.examples import train_ddp
from tests._torchrun import TorchrunJob, kill_marked
from tests.multihost.hosts import TwoHosts
from tests.slurm.daemons import free_port

TRAIN_DDP = Path(train_ddp.__file__)


def _two_node_command(hosts: TwoHosts, port: int, *script_args: str) -> str:
    """One torchrun per host (static rendezvous at nwb-a's address), both started by one shell: the
    command ``watch`` runs, as an ``srun torchrun`` would start one per node."""
    master = hosts.addr("nwb-a")
    nodes = []
    for node_rank, host in enumerate(("nwb-a", "nwb-b")):
        argv = [*hosts.prefix(host), sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2",
                f"--node-rank={node_rank}", f"--master-addr={master}", f"--master-port={port}",
                str(TRAIN_DDP), *script_args]
        nodes.append(shlex.join(argv) + " &")
    return "\n".join([*nodes, "wait %1; a=$?; wait %2; b=$?", 'exit $(( a > b ? a : b ))'])


def test_watch_names_a_late_rank_on_the_other_node(hosts: TwoHosts, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    script = _two_node_command(hosts, free_port(), "--steps", "10", "--fault", "stall-data", "--fault-rank", "3",
                               "--stall-s", "3", "--pg-timeout-s", "60", "--out-dir", str(tmp_path / "ckpt"))
    watch = [*hosts.prefix("nwb-a"), sys.executable, "-m", "nccl_workbook.cli", "watch", "--quiet",
             "--json", str(report_path), "--hub-host", hosts.addr("nwb-a"), "--", "sh", "-c", script]
    job = TorchrunJob(watch, deadline_s=150, env={"PYTHONPATH": str(Path.cwd())})
    try:
        result = job.wait(170)
    finally:
        job.close()
        kill_marked(job.job_id)
    assert not result.timed_out and report_path.exists(), result.output[-4000:]
    report = json.loads(report_path.read_text())
    assert report["world_size"] == 4, result.output[-3000:]
    hosts_of = {r["rank"]: r["host"] for r in report["ranks"]}
    assert hosts_of == {0: "nwb-a", 1: "nwb-a", 2: "nwb-b", 3: "nwb-b"}, report["ranks"]
    stall = report["stalls"][0]
    assert stall["culprit_ranks"] == [3] and stall["waiting_ranks"] == [0, 1, 2], stall
    assert stall["detected_after_s"] <= 1.5 and stall["resolved"], stall
    assert report["exit_code"] == 0, result.output[-3000:]
