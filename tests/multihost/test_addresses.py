"""The addresses a cluster uses across hosts, asked on the namespace hosts themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.multihost.hosts import SUBNET, TwoHosts

PROBE = """
import json, socket
from nccl_workbook import launchers
print(json.dumps({"host": socket.gethostname(), "host_address": launchers.host_address(),
                  "toward_peer": launchers.rendezvous_toward("%s")[0],
                  "toward_loopback": launchers.rendezvous_toward("127.0.0.1")[0]}))
"""


def _probe(hosts: TwoHosts, host: str, peer: str, **env: str) -> dict:
    out = subprocess.run([*hosts.prefix(host), sys.executable, "-c", PROBE % peer], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd(), **env}, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_each_host_binds_on_its_own_namespace_address(hosts: TwoHosts) -> None:
    a = _probe(hosts, "nwb-a", f"{SUBNET}.2")
    b = _probe(hosts, "nwb-b", f"{SUBNET}.1")
    assert a == {"host": "nwb-a", "host_address": f"{SUBNET}.1", "toward_peer": f"{SUBNET}.1", "toward_loopback": "127.0.0.1"}
    assert b == {"host": "nwb-b", "host_address": f"{SUBNET}.2", "toward_peer": f"{SUBNET}.2", "toward_loopback": "127.0.0.1"}


def test_host_address_from_the_environment(hosts: TwoHosts) -> None:
    assert _probe(hosts, "nwb-a", f"{SUBNET}.2", NCCL_WORKBOOK_HOST_ADDR="10.213.7.1")["host_address"] == "10.213.7.1"
