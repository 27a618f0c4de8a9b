"""Two "hosts" on this machine: network namespaces joined by a veth pair, each with a hostname of its own.

``nwb-a`` is 10.213.7.1 and ``nwb-b`` is 10.213.7.2, in a private /24 that exists only between the
two namespaces (the machine's own interfaces and routes are not touched, and nothing here talks to
any other address). :meth:`TwoHosts.prefix` is the argv that runs a command "on" a host: inside its
network namespace, with ``/etc/netns/NS/hosts`` bind-mounted on ``/etc/hosts`` so the two names
resolve there, and in a UTS namespace of its own with that hostname (``unshare --uts``), so that
``socket.gethostname()`` differs per host as on real machines. Processes still share this machine's
pid space, file system and clock (per-host clock offsets are measured, and come out near zero).
:meth:`TwoHosts.remove` deletes the namespaces (the veth pair goes with them) and the hosts files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SUBNET = "10.213.7"


class TwoHosts:
    def __init__(self, tag: str | None = None) -> None:
        tag = tag or str(os.getpid())
        self.hosts = {"nwb-a": f"{SUBNET}.1", "nwb-b": f"{SUBNET}.2"}
        self.netns = {h: f"{h}-{tag}" for h in self.hosts}
        self._veth = {"nwb-a": f"nwbva{tag}"[:15], "nwb-b": f"nwbvb{tag}"[:15]}
        self._created: list[str] = []

    def addr(self, host: str) -> str:
        return self.hosts[host]

    def prefix(self, host: str) -> list[str]:
        # not `ip netns exec`: it remounts /sys for the namespace, and slurmd then finds no
        # /sys/fs/cgroup; enter the network namespace only, bind its hosts file in a mount
        # namespace of the command's own
        hosts_file = str(Path("/etc/netns") / self.netns[host] / "hosts")
        return ["nsenter", f"--net=/run/netns/{self.netns[host]}", "unshare", "--uts", "--mount", "sh", "-c",
                'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"', host, hosts_file]

    def create(self) -> TwoHosts:
        def ip(*args: str) -> None:
            subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

        for host, ns in self.netns.items():
            ip("netns", "add", ns)
            self._created.append(ns)
            folder = Path("/etc/netns") / ns
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"{a} {h}\n" for h, a in self.hosts.items()))
        a, b = self._veth["nwb-a"], self._veth["nwb-b"]
        ip("link", "add", a, "type", "veth", "peer", "name", b)
        for host in self.hosts:
            ns, dev = self.netns[host], self._veth[host]
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{self.hosts[host]}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        return self

    def remove(self) -> None:
        for ns in self._created:
            # anything still running inside would keep the namespace's network alive
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self._created.clear()
