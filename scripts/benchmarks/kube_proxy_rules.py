"""kube-proxy rules at scale: 10,000 Services x 5 endpoints.

- render: labkit.kubeproxy.render of the whole cluster for one node (a kube-proxy full sync's text);
- restore: iptables-legacy-restore of that text into a fresh lab network namespace (target: render
  takes no longer than the restore);
- trace: one packet through the loaded ruleset, read back from the namespace (target < 50 ms);
  parsing and indexing the ruleset are measured separately.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from figures import Figure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

SERVICES = 10_000
ENDPOINTS = 5


def cluster(services: int = SERVICES, endpoints: int = ENDPOINTS) -> list[dict]:
    objects = []
    for i in range(services):
        ns, name = f"ns{i % 50}", f"svc{i}"
        objects.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                        "spec": {"type": "ClusterIP", "clusterIP": f"172.30.{i // 250}.{i % 250 + 1}",
                                 "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}})
        objects.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"name": f"{name}-1", "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
                        "addressType": "IPv4",
                        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                        "endpoints": [{"addresses": [f"10.{(i * endpoints + e) // 62500 + 1}.{(i * endpoints + e) // 250 % 250}.{(i * endpoints + e) % 250 + 1}"],
                                       "nodeName": f"node{e % 3}"} for e in range(endpoints)]})
    return objects


@contextmanager
def lab_namespace():
    from labkit.netlab import create_netns
    from labkit.state import LabEnv, LabState

    env = LabEnv(SimpleNamespace(id="bench-kp"), LabState("bench-kp"))
    env.state.ensure_dir()
    try:
        yield create_netns(env, "node")
    finally:
        env.ledger.cleanup()


def run() -> list[Figure]:
    from labkit.kubeproxy import ProxierConfig, render
    from labkit.kubeproxy.sync import ensure_jump_rules
    from labkit.netfilter import Packet, Tracer, load, parse
    from labkit.netfilter.live import read_live_text

    objects = cluster()
    config = ProxierConfig(hostname="node0", node_ips=["192.168.0.2"], cluster_cidr="10.0.0.0/8",
                           local_addresses=["192.168.0.2/24", "127.0.0.1/8"])
    start = time.perf_counter()
    text = render(objects, config)
    render_s = time.perf_counter() - start
    rules = sum(1 for line in text.splitlines() if line.startswith("-A "))

    with lab_namespace() as netns:
        ensure_jump_rules(netns, config)
        load.ensure_nfacct(netns, config.nfacct_counters)
        start = time.perf_counter()
        load.restore(netns, text, counters=True)
        restore_s = time.perf_counter() - start
        start = time.perf_counter()
        live_text = read_live_text(netns)
        read_s = time.perf_counter() - start
    start = time.perf_counter()
    ruleset = parse(live_text)
    tracer = Tracer(ruleset, config.local_addresses)
    tracer.trace(Packet("10.0.0.2", "172.30.0.1", 80))          # first trace builds the chain indexes
    parse_s = time.perf_counter() - start
    times = []
    for i in (17, 4_242, 9_999):
        packet = Packet("10.0.0.2", f"172.30.{i // 250}.{i % 250 + 1}", 80)
        start = time.perf_counter()
        result = Tracer(ruleset, config.local_addresses).trace(packet)
        times.append(time.perf_counter() - start)
        assert len(result.dnat) == ENDPOINTS, result.dnat
    trace_ms = max(times) * 1000
    return [
        Figure("kube-proxy rules", f"render {SERVICES:,} services x {ENDPOINTS} endpoints ({rules:,} rules)", round(render_s, 3), "s",
               target="<= restore", met=render_s <= restore_s),
        Figure("kube-proxy rules", "iptables-legacy-restore of that text into a fresh namespace", round(restore_s, 3), "s"),
        Figure("kube-proxy rules", "read back with python-iptables", round(read_s, 3), "s"),
        Figure("kube-proxy rules", "parse + index the live ruleset (once)", round(parse_s, 3), "s"),
        Figure("kube-proxy rules", "trace one packet (worst of 3)", round(trace_ms, 1), "ms", target="< 50 ms", met=trace_ms < 50),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure)
