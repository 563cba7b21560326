"""The live kube-proxy cluster: build it from a scenario, change it, send traffic through it.

Used by labs/kube-proxy/lab.py (building), by `labkit kube-proxy apply|curl|graph`, and by the
lab's checks and solutions. The cluster state is labkit.kubeproxy.cluster_state; the network is
labkit.netlab.cluster; each node's rules come from labkit.kubeproxy.node_sync.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError
from labkit.kubeproxy import node_sync
from labkit.kubeproxy.cluster_state import ClusterState, load_scenario, read_documents
from labkit.netlab import cluster as netcluster
from labkit.netlab.netns import exists
from labkit.netlab.traffic import http_requests
from labkit.shell import Host

LAB_ID = "kube-proxy"


def build(env, scenario: Path, log=lambda msg: None) -> ClusterState:
    """Everything `labkit run kube-proxy` creates: network, pods, and a first full sync per node."""
    state = load_scenario(scenario)
    env.ledger.record("path", path=str(ClusterState.path(env)))
    state.save(env)
    net = state.network_layout()
    netcluster.build(env, net)
    log("network built")
    netcluster.start_pod_servers(env, net, state.pod_ports())
    log("pod servers listening")
    node_sync.sync_nodes(env, state)
    log("nodes synced")
    return state


def load(env) -> ClusterState:
    try:
        return ClusterState.load(env)
    except (OSError, ValueError, KeyError):
        raise LabkitError(f"lab {env.lab.id} has no cluster state: start it with `labkit run {env.lab.id}`")


def is_up(env) -> bool:
    try:
        state = ClusterState.load(env)
    except (OSError, ValueError, KeyError):
        return False
    net = state.network_layout()
    names = [net.lan.host, *(n.name for n in net.nodes), *(h.name for h in net.hosts), *(p.name for p in net.pods)]
    if not all(exists(env.netns_name(n)) for n in names):
        return False
    return all(procs.find(procs.owner_token(env, netcluster.server_tag(p.name))) for p in net.pods)


def hosts(env) -> dict[str, Host]:
    state = ClusterState.load(env)
    out = {}
    for node in state.node_names():
        out[node] = Host(f"node {node} ({state.node_address(node)}), where kube-proxy's rules live",
                         netns=env.netns_name(node))
    for host in state.hosts:
        out[host["name"]] = Host(f"{host['name']} ({host['addresses'][0]}), outside the cluster",
                                 netns=env.netns_name(host["name"]))
    for pod in state.pods:
        out[pod["metadata"]["name"]] = Host(
            f"pod {pod['metadata']['name']} ({pod['status']['podIP']}) on {pod['spec']['nodeName']}",
            netns=env.netns_name(pod["metadata"]["name"]))
    out["lan"] = Host(f"the LAN and its router ({state.network['gateway']})", netns=env.netns_name("lan"))
    return out


def apply_file(env, path: Path) -> set[tuple[str, str]]:
    """`labkit kube-proxy apply -f FILE`: change Services/EndpointSlices, then sync both nodes
    (a partial sync, as kube-proxy does after a change: only the changed Services' chains)."""
    state = load(env)
    changed = state.apply(read_documents(path), str(path))
    state.save(env)
    node_sync.sync_nodes(env, state, changed=changed)
    return changed


# -- traffic ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    ip: str
    port: int
    description: str


def resolve_target(state: ClusterState, text: str) -> Target:
    """SERVICE[:PORT] (name or namespace/name; PORT a port name or number) or IP:PORT."""
    host, _, port = text.rpartition(":")
    if host:
        try:
            ipaddress.IPv4Address(host)
            return Target(host, int(port), text)
        except ValueError:
            pass
    else:
        host, port = text, ""
    namespace, _, name = host.rpartition("/")
    svc = state.service(name, namespace or "default")
    if svc is None:
        known = ", ".join(s["metadata"]["name"] for s in state.services)
        raise LabkitError(f"no Service {host!r} and not an IP:PORT (Services: {known})")
    ports = svc["spec"].get("ports", [])
    chosen = [p for p in ports if not port or p.get("name") == port or str(p["port"]) == port]
    if not chosen or (len(chosen) > 1):
        names = ", ".join(f"{p.get('name') or '-'}={p['port']}" for p in ports)
        raise LabkitError(f"Service {host}: say which port with {host}:PORT (ports: {names})")
    ip = svc["spec"].get("clusterIP")
    if not ip or ip == "None":
        raise LabkitError(f"Service {host} has no cluster IP")
    return Target(ip, chosen[0]["port"], f"Service {namespace or 'default'}/{name} ({ip}:{chosen[0]['port']})")


@dataclass
class Tally:
    """What N requests found: who answered how often, and which client address each pod saw."""
    sent: int
    answered: Counter = field(default_factory=Counter)           # pod -> replies
    nodes: dict = field(default_factory=dict)                    # pod -> node
    seen_clients: dict = field(default_factory=dict)             # pod -> Counter(client address)
    failures: Counter = field(default_factory=Counter)           # error -> count
    replies: list = field(default_factory=list)                  # the raw results, in order

    @property
    def ok(self) -> int:
        return sum(self.answered.values())

    def to_dict(self) -> dict:
        return {
            "sent": self.sent, "ok": self.ok, "failed": dict(self.failures),
            "pods": {pod: {"count": n, "node": self.nodes[pod], "clients": dict(self.seen_clients[pod])}
                     for pod, n in sorted(self.answered.items())},
        }


def tally(results: list[dict]) -> Tally:
    out = Tally(len(results), replies=results)
    for r in results:
        if r.get("ok") and r.get("body"):
            pod = r["body"]["pod"]
            out.answered[pod] += 1
            out.nodes[pod] = r["body"]["node"]
            out.seen_clients.setdefault(pod, Counter())[r["body"]["client"]] += 1
        else:
            out.failures[r.get("error") or f"HTTP {r.get('status')}"] += 1
    return out


def send(env, from_host: str, ip: str, port: int, count: int, *, source: str | None = None,
         timeout: float = 1.0, parallel: int = 1) -> Tally:
    """`count` real requests from a lab host (node, pod or client) to ip:port."""
    if not exists(env.netns_name(from_host)):
        raise LabkitError(f"lab {env.lab.id} has no host {from_host!r} (see `labkit run {env.lab.id}`)")
    return tally(http_requests(env.netns_name(from_host), ip, port, count, source=source,
                               timeout=timeout, parallel=parallel))
