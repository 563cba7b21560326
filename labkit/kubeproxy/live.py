"""The live kube-proxy cluster: build it from a scenario, change it, send traffic through it.

Used by labs/kube-proxy/lab.py (building), by `labkit kube-proxy apply|curl|graph`, and by the
lab's checks and solutions. The cluster state is labkit.kubeproxy.cluster_state; the network is
labkit.netlab.cluster; each node's rules are rendered and loaded by labkit.kubeproxy (render, sync_node).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from labkit import procs
from labkit.errors import LabkitError
from labkit.kubeproxy import node as nodesetup
from labkit.kubeproxy.chains import endpoint_chain, is_service_chain, port_proto_hash, SERVICE_CHAIN_PREFIXES
from labkit.kubeproxy.cluster_state import ClusterState, load_scenario
from labkit.kubeproxy.config import ProxierConfig
from labkit.kubeproxy.judge import record_sync
from labkit.kubeproxy.proxier import changed_services, health_check_services
from labkit.kubeproxy.situations import remember_outcome_node_ports
from labkit.kubeproxy.sync import canary_present, sync_node
from labkit.netlab import brnetfilter
from labkit.netlab import cluster as netcluster
from labkit.netlab.netns import exists
from labkit.netlab.traffic import http_requests
from labkit.shell import Host

HEALTH_SERVER = Path(__file__).resolve().parent / "healthserver.py"


def build(env, scenario: Path, log=lambda msg: None) -> ClusterState:
    """Everything `labkit run kube-proxy` creates: network, pods, each node's kubelet and CNI
    setup (labkit.kubeproxy.node), kube-proxy's health server and a first full sync per node."""
    state = load_scenario(scenario)
    try:
        if brnetfilter.ensure(env):
            log(f"loaded {brnetfilter.MODULE} (unloaded again at cleanup)")
    except RuntimeError as exc:
        raise LabkitError(str(exc)) from None
    env.ledger.record("path", path=str(ClusterState.path(env)))
    state.save(env)
    net = state.network_layout()
    netcluster.build(env, net)
    log("network built")
    netcluster.start_pod_servers(env, net, state.pod_ports())
    log("pod servers listening")
    for node in state.node_names():
        config = proxier_config(state, node)
        nodesetup.prepare(env.netns_name(node), state.kube_proxy_configuration,
                          localhost_nodeports=config.localhost_nodeports)
    start_health_servers(env, state)
    sync_nodes(env, state)
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
    tags = [netcluster.server_tag(p.name) for p in net.pods] + [health_server_tag(n.name) for n in net.nodes]
    if not all(procs.running(procs.owner_token(env, tag)) for tag in tags):
        return False
    # A node whose pod bridge no longer passes traffic to iptables is broken: `labkit run` rebuilds.
    return all(nodesetup.node_sysctls(env.netns_name(n.name)).get("net.bridge.bridge-nf-call-iptables") == "1"
               for n in net.nodes)


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


def apply_documents(env, documents: list[dict], source: str, *, status: bool = False) -> tuple[list[str], dict[str, set[str]]]:
    """`labkit kube-proxy apply -f FILE`: change Services/EndpointSlices (with `status`, only the
    Services' status, like --subresource status), then sync every node the way kube-proxy reacts
    to a change: a partial sync that rewrites only the chains of the Services that changed
    (proxier.go, syncProxyRules with tryPartialSync). Returns kubectl-like lines ("service/web
    configured") and, per node, the services whose chains were rewritten."""
    state = load(env)
    before = state.objects()
    report = state.apply_status(documents, source) if status else state.apply(documents, source)
    state.save(env)
    return report, sync_nodes(env, state, before=before)


def delete_objects(env, refs: list[tuple[str, str, str]]) -> tuple[list[str], list[str], dict[str, set[str]]]:
    """`labkit kube-proxy delete`: remove Services/EndpointSlices ((kind, namespace, name) each),
    then sync every node as kube-proxy reacts to the deletion (a partial sync of what changed).
    Returns kubectl's lines, the NotFound errors, and per node the services rewritten."""
    state = load(env)
    before = state.objects()
    deleted, missing = state.delete(refs)
    if not deleted:
        return deleted, missing, {}
    state.save(env)
    return deleted, missing, sync_nodes(env, state, before=before)


# -- kube-proxy on the nodes ---------------------------------------------------------------------

def proxier_config(state: ClusterState, node: str) -> ProxierConfig:
    """kube-proxy's view of one node: the lab's KubeProxyConfiguration, the node's name and IP,
    and the addresses of its interfaces (lo, eth0 on the LAN, cni0 on the pod network)."""
    net = state.network_layout()
    spec = net.node(node)
    local = ["127.0.0.1/8", f"{spec.address}/{net.lan.prefixlen}",
             f"{spec.pod_gateway}/{ipaddress.ip_network(spec.pod_cidr).prefixlen}"]
    return ProxierConfig.from_kube_proxy_configuration(
        state.kube_proxy_configuration, hostname=node, node_ips=[spec.address], local_addresses=local)


def programmed_services(objects: list[dict], changed: set[str] | None) -> set[str]:
    """The "namespace/name"s among `changed` (None: every Service) that kube-proxy writes rules for:
    a Service labelled service.kubernetes.io/service-proxy-name is another proxy's, and kube-proxy's
    informers never see it (cmd/kube-proxy/app/server.go, the label selector of newProxyServer's
    informer factory: `!service.kubernetes.io/service-proxy-name`)."""
    from labkit.kubeproxy.objects import SERVICE_PROXY_NAME_LABEL
    out = set()
    for obj in objects:
        if obj.get("kind") != "Service" or SERVICE_PROXY_NAME_LABEL in ((obj.get("metadata") or {}).get("labels") or {}):
            continue
        key = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
        if changed is None or key in changed:
            out.add(key)
    return out


def sync_nodes(env, state: ClusterState, before: list[dict] | None = None) -> dict[str, set[str] | None]:
    """Sync kube-proxy's rules on every node: a full sync without `before` (kube-proxy's first
    sync), otherwise a partial sync of the Services that changed since `before`. Returns, per
    node, the services rewritten (None: all)."""
    objects = state.objects()
    done = {}
    for node in state.node_names():
        config = proxier_config(state, node)
        netns = env.netns_name(node)
        changed = None if before is None else changed_services(before, objects, config)
        if changed is not None and not canary_present(netns):
            changed = None       # kube-proxy's iptables monitor saw its canary go: a full sync
        if changed is not None and not changed:
            # Nothing changed for kube-proxy: OnServiceUpdate / OnEndpointSliceUpdate (proxier.go) only
            # call Sync() when the change trackers report a change.
            done[node] = changed
            continue
        sync_node(netns, objects, config, changed_services=changed)
        record_sync(env, node, changed, programmed_services(objects, changed))
        write_health_config(env, node, health_check_services(objects, config))
        done[node] = changed
    remember_outcome_node_ports(env, state)
    return done


# -- kube-proxy's service health server ------------------------------------------------------------

def health_server_tag(node: str) -> str:
    return f"healthcheck-{node}"


def health_config_path(env, node: str) -> Path:
    return Path(env.dir) / f"healthcheck-{node}.json"


def write_health_config(env, node: str, services: list[dict]) -> None:
    path = health_config_path(env, node)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"services": services}))
    os.replace(tmp, path)


def start_health_servers(env, state: ClusterState, timeout: float = 10.0) -> None:
    """One health server per node (labkit/kubeproxy/healthserver.py), like kube-proxy's, serving
    the healthCheckNodePorts that each sync writes to its node's file."""
    for node in state.node_names():
        path = health_config_path(env, node)
        env.ledger.record("path", path=str(path))
        write_health_config(env, node, [])
        argv = [sys.executable, "-I", "-S", str(HEALTH_SERVER), "--config", str(path)]
        if not procs.spawn_until_ready(env, health_server_tag(node), argv, netns=env.netns_name(node),
                                       timeout=timeout):
            raise LabkitError(f"kube-proxy's health server on {node} did not start; see {env.dir / 'logs'}")


def rules_of_service(state: ClusterState, namespace: str, name: str):
    """A rule filter for the chain graph of one Service. In kube-proxy's shared chains
    (KUBE-SERVICES, KUBE-NODEPORTS, the built-in chains, ...) it keeps the rules that lead into
    this Service's own chains, by the chain names kube-proxy computes for its ports and endpoints,
    and the rules that match its cluster IP, external IPs, load-balancer IPs or node ports, with or
    without a comment (hand-written rules often have none); everything else there is left out
    unless it jumps somewhere that is not a per-service chain. In per-service chains
    (KUBE-SVC/SVL/EXT/FW/SEP and chains reached from kept rules) everything is kept."""
    svc = state.service(name, namespace) or {}
    spec = svc.get("spec") or {}
    hashes, node_ports = set(), set()
    for port in spec.get("ports") or []:
        spn = f"{namespace}/{name}" + (f":{port['name']}" if port.get("name") else "")
        hashes.add(port_proto_hash(spn, port.get("protocol", "TCP")))
        if port.get("nodePort"):
            node_ports.add(port["nodePort"])
        for sl in state.slices_of(namespace, name):
            for sl_port in sl.get("ports") or []:
                if sl_port.get("name", "") == port.get("name", "") and sl_port.get("port"):
                    for ep in sl.get("endpoints") or []:
                        hashes.add(endpoint_chain(spn, port.get("protocol", "TCP"),
                                                  f"{ep['addresses'][0]}:{sl_port['port']}")[len("KUBE-SEP-"):])
    addresses = {ipaddress.ip_address(a) for a in [spec.get("clusterIP"), *(spec.get("externalIPs") or []),
                                                    *(i.get("ip") for i in ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or [])]
                 if a and a != "None"}
    mentions = re.compile(rf"(^|\s){re.escape(namespace)}/{re.escape(name)}(:|\s|$)")

    def own_chain(chain: str) -> bool:
        return any(chain.startswith(p) and chain[len(p):] in hashes for p in SERVICE_CHAIN_PREFIXES)

    def matches_service(rule) -> bool:
        dst = rule.cond("dst")
        if dst is not None and not dst.negated and dst.value.num_addresses == 1 and dst.value.network_address in addresses:
            return True
        dport = rule.cond("dport")
        return rule.chain == "KUBE-NODEPORTS" and dport is not None and any(
            lo <= p <= hi for lo, hi in dport.value for p in node_ports)

    def keep(chain: str, rule) -> bool:
        if is_service_chain(chain) or own_chain(chain):
            return True
        if rule.target and (own_chain(rule.target) or matches_service(rule)):
            return True
        if rule.comment and mentions.search(rule.comment):
            return True
        return not (rule.target and (is_service_chain(rule.target) or matches_service(rule)))

    return keep


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
    if len(chosen) != 1:
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
    out = Tally(len(results))
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
