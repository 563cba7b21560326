"""kube-proxy rules at scale: 10,000 Services x 5 endpoints, every figure a whole process.

- render: `labkit kube-proxy render -f FILE` of the whole cluster for one node (a kube-proxy full
  sync's text), from the objects as `kubectl get svc,endpointslices -A -o json` prints them (one
  List, kubectl's metadata, EndpointSlices written by the EndpointSlice controller) and from the
  same objects as multi-document YAML. Target: no longer than the restore below.
- restore: iptables-legacy-restore of that text into a fresh lab network namespace, as kube-proxy
  loads it (after its jump rules and nfacct counters).
- trace: `labkit trace --rules FILE` of one packet through that text and through the ruleset as
  iptables-save prints it back from the namespace (target < 1 s each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from random import Random
from types import SimpleNamespace

from figures import REPO, Figure, time_command

sys.path.insert(0, str(REPO))

SERVICES = 10_000
ENDPOINTS = 5
NODE = ["--hostname", "node0", "--node-ip", "192.168.0.2", "--local-address", "192.168.0.2/24"]


def cluster(services: int = SERVICES, endpoints: int = ENDPOINTS) -> list[dict]:
    """The Services and EndpointSlices as an API server stores them and kubectl prints them."""
    rand = Random(1)
    uid = lambda: str(uuid.UUID(int=rand.getrandbits(128)))
    stamp = "2025-06-01T10:00:00Z"
    objects = []
    for i in range(services):
        ns, name = f"ns{i % 50}", f"svc{i}"
        ip = f"172.30.{i // 250}.{i % 250 + 1}"
        svc_uid = uid()
        objects.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"creationTimestamp": stamp, "labels": {"app": name}, "name": name, "namespace": ns,
                         "resourceVersion": str(1000 + i), "uid": svc_uid},
            "spec": {"clusterIP": ip, "clusterIPs": [ip], "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack",
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                     "selector": {"app": name}, "sessionAffinity": "None", "type": "ClusterIP"},
            "status": {"loadBalancer": {}}})
        eps = []
        for e in range(endpoints):
            k = i * endpoints + e
            eps.append({"addresses": [f"10.{k // 62500 + 1}.{k // 250 % 250}.{k % 250 + 1}"],
                        "conditions": {"ready": True, "serving": True, "terminating": False},
                        "nodeName": f"node{e % 3}",
                        "targetRef": {"kind": "Pod", "name": f"{name}-{e}", "namespace": ns, "uid": uid()}})
        objects.append({
            "addressType": "IPv4", "apiVersion": "discovery.k8s.io/v1", "endpoints": eps, "kind": "EndpointSlice",
            "metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": stamp},
                         "creationTimestamp": stamp, "generateName": f"{name}-", "generation": 1,
                         "labels": {"app": name, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                                    "kubernetes.io/service-name": name},
                         "name": f"{name}-x7k2p", "namespace": ns,
                         "ownerReferences": [{"apiVersion": "v1", "blockOwnerDeletion": True, "controller": True,
                                              "kind": "Service", "name": name, "uid": svc_uid}],
                         "resourceVersion": str(2000 + i), "uid": uid()},
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})
    return objects


def write_inputs(directory: Path) -> tuple[Path, Path]:
    import yaml

    objects = cluster()
    as_json = directory / "cluster.json"          # kubectl get -o json: 4-space indent, a List
    as_json.write_text(json.dumps({"apiVersion": "v1", "items": objects, "kind": "List",
                                   "metadata": {"resourceVersion": ""}}, indent=4) + "\n")
    as_yaml = directory / "cluster.yaml"          # the same objects, one YAML document each
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    as_yaml.write_text(yaml.dump_all(objects, Dumper=dumper, default_flow_style=False))
    return as_json, as_yaml


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


def render_command(source: Path, output: Path) -> list[str]:
    command = " ".join([sys.executable, "-m", "labkit", "kube-proxy", "render", "-f", str(source), *NODE])
    return ["sh", "-c", f"{command} > {output}"]


def run() -> list[Figure]:
    from labkit.kubeproxy import ProxierConfig
    from labkit.kubeproxy.sync import ensure_jump_rules
    from labkit.netfilter import load

    env = dict(os.environ)
    config = ProxierConfig(hostname="node0", node_ips=["192.168.0.2"], local_addresses=["192.168.0.2/24", "127.0.0.1/8"])
    with tempfile.TemporaryDirectory(prefix="labkit-bench-kp-") as tmp:
        directory = Path(tmp)
        as_json, as_yaml = write_inputs(directory)
        rules = directory / "rules.txt"
        from_json = time_command(render_command(as_json, rules), env)
        from_yaml = time_command(render_command(as_yaml, directory / "rules-yaml.txt"), env)
        same = (directory / "rules-yaml.txt").read_text() == rules.read_text()
        text = rules.read_text()
        count = sum(1 for line in text.splitlines() if line.startswith("-A "))
        with lab_namespace() as netns:
            ensure_jump_rules(netns, config)
            load.ensure_nfacct(netns, config.nfacct_counters)
            start = time.perf_counter()
            load.restore(netns, text, counters=True)
            restore_s = time.perf_counter() - start
            saved = load.save(netns)
        saved_rules = directory / "saved.txt"
        saved_rules.write_text(saved)
        trace_s = {}
        for name, path in (("restore", rules), ("save", saved_rules)):
            argv = [sys.executable, "-m", "labkit", "trace", "--rules", str(path), "--src", "10.0.0.2",
                    "--dst", "172.30.17.3:80", "--local-address", "192.168.0.2"]
            check = subprocess.run(argv + ["-o", "json"], capture_output=True, text=True, cwd=REPO)
            if len(json.loads(check.stdout)["dnat"]) != ENDPOINTS:
                raise RuntimeError(f"trace of {path} found {check.stdout[:300]}")
            trace_s[name] = min(time_command(argv, env) for _ in range(3))
        sizes = {p: f"{p.stat().st_size / 1e6:.1f} MB" for p in (as_json, as_yaml)}
        mb = sizes.get
    scale = f"{SERVICES:,} services x {ENDPOINTS} endpoints, {count:,} rules"
    return [
        Figure("kube-proxy rules", f"labkit kube-proxy render from kubectl JSON ({mb(as_json)}; {scale})", round(from_json, 3), "s",
               target="<= restore", met=from_json <= restore_s),
        Figure("kube-proxy rules", f"labkit kube-proxy render from multi-document YAML ({mb(as_yaml)})", round(from_yaml, 3), "s",
               target="<= restore", met=from_yaml <= restore_s, note="same rules" if same else "RULES DIFFER"),
        Figure("kube-proxy rules", "iptables-legacy-restore of those rules into a fresh namespace", round(restore_s, 3), "s"),
        Figure("kube-proxy rules", "labkit trace --rules of one packet through that restore text, best of 3",
               round(trace_s["restore"], 3), "s", target="< 1 s", met=trace_s["restore"] < 1.0),
        Figure("kube-proxy rules", "labkit trace --rules of one packet through iptables-save of the loaded namespace, best of 3",
               round(trace_s["save"], 3), "s", target="< 1 s", met=trace_s["save"] < 1.0),
    ]


if __name__ == "__main__":
    for figure in run():
        print(figure)
