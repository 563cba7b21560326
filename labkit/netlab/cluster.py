"""A small Kubernetes-style cluster network, built from named network namespaces.

    client ─┐                      (hosts outside the cluster)
            ├── lan0 (the LAN, with its gateway address) ──┬── eth0 node1   cni0 ── veth-… ── eth0 pod
            │                                               └── eth0 node2   cni0 ── veth-… ── eth0 pod

- The LAN is a bridge in a namespace of its own; it also holds the LAN's gateway address, so
  that hosts have a default route (packets to unknown destinations end there and are dropped,
  like a router that knows no route to them).
- Each node is a namespace with `eth0` on the LAN, a pod bridge `cni0` holding the first address
  of its pod CIDR, IPv4 forwarding on, and a route to every other node's pod CIDR via that node
  (what a simple "host-gw" CNI does). Pod ports on `cni0` have hairpin mode on, like the CNI
  bridge plugin with `hairpinMode: true`, so a pod's packets can come back to it through the node.
- Each pod is a namespace with `eth0` (address in its node's pod CIDR) and a default route via
  its node's `cni0` address.

Nothing is connected to the host's root namespace. Every namespace and link is recorded in the
lab's ledger before it is created (labkit.netlab).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError

from labkit.netlab.netns import create_netns, netns_path, run_in

POD_BRIDGE = "cni0"


@dataclass(frozen=True)
class Lan:
    cidr: str        # e.g. 192.168.50.0/24
    gateway: str     # e.g. 192.168.50.1
    host: str = "lan"
    bridge: str = "lan0"

    @property
    def prefixlen(self) -> int:
        return ipaddress.ip_network(self.cidr).prefixlen


@dataclass(frozen=True)
class Node:
    name: str
    address: str     # on the LAN, e.g. 192.168.50.11
    pod_cidr: str    # e.g. 10.244.1.0/24

    @property
    def pod_gateway(self) -> str:
        """The node's address on its pod bridge: the first address of the pod CIDR."""
        return str(next(ipaddress.ip_network(self.pod_cidr).hosts()))


@dataclass(frozen=True)
class Pod:
    name: str
    node: str
    address: str


@dataclass(frozen=True)
class Host:
    """A machine on the LAN outside the cluster; the first address is its primary one."""
    name: str
    addresses: tuple[str, ...]


@dataclass
class ClusterNetwork:
    lan: Lan
    nodes: list[Node]
    pods: list[Pod] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)


def pod_port_name(pod: str) -> str:
    """The node-side name of a pod's veth (at most 15 characters, as the kernel demands)."""
    name = f"veth-{pod}"
    return name if len(name) <= 15 else "veth" + hashlib.sha256(pod.encode()).hexdigest()[:11]


def _ip_batch(netns: str, commands: list[str]) -> subprocess.Popen:
    """Start `ip -batch` in a lab namespace: one process for many link/address/route commands."""
    proc = subprocess.Popen(["nsenter", f"--net={netns_path(netns)}", "--", "ip", "-batch", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdin.write("\n".join(commands) + "\n")
    proc.stdin.close()
    return proc


def _wait(procs_by_ns: dict[str, subprocess.Popen]) -> None:
    for netns, proc in procs_by_ns.items():
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise LabkitError(f"configuring the network in {netns} failed: {err.strip()}")


def build(env, net: ClusterNetwork) -> None:
    """Create the whole network: every namespace first, then one `ip -batch` per namespace.

    Each link is recorded in the ledger before the batch that creates it.
    """
    lan_ns = create_netns(env, net.lan.host)
    on_lan = [(n.name, [n.address]) for n in net.nodes] + [(h.name, list(h.addresses)) for h in net.hosts]
    ns_of = {name: create_netns(env, name) for name, _ in on_lan}
    ns_of.update({pod.name: create_netns(env, pod.name) for pod in net.pods})
    prefix = f"/{net.lan.prefixlen}"

    # the LAN: its bridge with the gateway address, and one port per node and host
    lan = [f"link add {net.lan.bridge} type bridge", f"link set {net.lan.bridge} up",
           f"addr add {net.lan.gateway}{prefix} dev {net.lan.bridge}"]
    env.ledger.record("link", netns=lan_ns, name=net.lan.bridge)
    for name, _ in on_lan:
        port = name[:15]
        env.ledger.record("link", netns=lan_ns, name=port)
        env.ledger.record("link", netns=ns_of[name], name="eth0")
        lan += [f"link add {port} type veth peer name eth0 netns {ns_of[name]}",
                f"link set {port} master {net.lan.bridge} up"]
    _wait({lan_ns: _ip_batch(lan_ns, lan)})

    # nodes and external hosts: their LAN address; nodes also a pod bridge, pod ports and routes
    batches = {}
    for name, addresses in on_lan:
        batches[name] = ["link set eth0 up", *(f"addr add {a}{prefix} dev eth0" for a in addresses),
                         f"route add default via {net.lan.gateway}"]
    for node in net.nodes:
        env.ledger.record("link", netns=ns_of[node.name], name=POD_BRIDGE)
        pod_prefix = ipaddress.ip_network(node.pod_cidr).prefixlen
        batch = batches[node.name]
        batch += [f"link add {POD_BRIDGE} type bridge", f"link set {POD_BRIDGE} up",
                  f"addr add {node.pod_gateway}/{pod_prefix} dev {POD_BRIDGE}"]
        batch += [f"route add {o.pod_cidr} via {o.address}" for o in net.nodes if o is not node]
        for pod in (p for p in net.pods if p.node == node.name):
            port = pod_port_name(pod.name)
            env.ledger.record("link", netns=ns_of[node.name], name=port)
            env.ledger.record("link", netns=ns_of[pod.name], name="eth0")
            batch += [f"link add {port} type veth peer name eth0 netns {ns_of[pod.name]}",
                      f"link set {port} master {POD_BRIDGE} up",
                      f"link set dev {port} type bridge_slave hairpin on"]
    _wait({ns_of[name]: _ip_batch(ns_of[name], batch) for name, batch in batches.items()})
    for node in net.nodes:
        run_in(ns_of[node.name], ["sysctl", "-qw", "net.ipv4.ip_forward=1"])

    # pods: their address and the default route via their node's pod bridge
    started = {}
    for pod in net.pods:
        node = net.node(pod.node)
        pod_prefix = ipaddress.ip_network(node.pod_cidr).prefixlen
        started[ns_of[pod.name]] = _ip_batch(ns_of[pod.name], [
            "link set eth0 up", f"addr add {pod.address}/{pod_prefix} dev eth0",
            f"route add default via {node.pod_gateway}"])
    _wait(started)


WHOAMI = Path(__file__).resolve().parent / "whoami.py"


def server_tag(pod: str) -> str:
    return f"pod-{pod}"


def start_pod_servers(env, net: ClusterNetwork, ports: dict[str, list[int]], *, timeout: float = 10.0) -> None:
    """Start the who-am-I server (labkit/netlab/whoami.py) in every pod, all at once.

    `ports` maps pod name to the TCP ports it listens on. Returns when every server listens;
    raises LabkitError naming the pods whose server did not come up (their logs say why).
    """
    read_end, write_end = os.pipe()
    try:
        for pod in net.pods:
            argv = [sys.executable, "-I", "-S", str(WHOAMI), "--pod", pod.name, "--node", pod.node,
                    "--ready-fd", str(write_end)]
            for port in ports.get(pod.name, []):
                argv += ["--port", str(port)]
            procs.spawn(env, server_tag(pod.name), argv, netns=env.netns_name(pod.name), pass_fds=(write_end,))
        os.close(write_end)
        write_end = -1
        ready = 0
        deadline = time.monotonic() + timeout
        while ready < len(net.pods):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                break
            data = os.read(read_end, 64)
            if not data:   # every server exited or signalled
                break
            ready += len(data)
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
    if ready < len(net.pods):
        down = [p.name for p in net.pods if not procs.find(procs.owner_token(env, server_tag(p.name)))]
        raise LabkitError(f"pod servers did not start ({ready} of {len(net.pods)} ready; not running: "
                          f"{', '.join(down) or 'none'}); see {env.dir / 'logs'}")
