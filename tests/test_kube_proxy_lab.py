"""The live kube-proxy lab with real packets: ClusterIP, NodePort, both external traffic policies,
masquerading, session affinity, services without endpoints, and the lab's commands.

Statistical assertions send enough requests that a correct setup fails them with probability
below 1e-6 (computation next to each sample size).
"""

import json
import subprocess

import pytest
import yaml

from kube_proxy_support import kube_proxy_lab, use
from support import labkit

from labkit.kubeproxy import live
from labkit.netfilter import parse, save

NODE1, NODE2, CLIENT = "192.168.50.11", "192.168.50.12", "192.168.50.100"
WEB = ("10.96.0.10", 80)
WEB_PODS = {"web-1", "web-2", "web-3", "web-4"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with kube_proxy_lab(tmp_path_factory.mktemp("kube-proxy-lab")) as env:
        yield env


@pytest.fixture
def env(lab, monkeypatch):
    return use(monkeypatch, lab)


def test_cluster_ip_reaches_every_endpoint_from_pods_and_nodes(env):
    # 4 sources x 4 pods, each missed with probability (3/4)^n: 16 * (3/4)^58 = 9.1e-7 < 1e-6.
    for host in ("web-1", "web-3", "node1", "node2"):
        tally = live.send(env, host, *WEB, 58)
        assert not tally.failures, (host, tally.failures)
        assert set(tally.answered) == WEB_PODS, (host, tally.answered)


def test_masquerade_of_cluster_ip_traffic(env):
    # From a pod (inside the cluster CIDR): no masquerade, except when the pod reaches itself
    # (hairpin: KUBE-SEP's "-s <pod IP> -j KUBE-MARK-MASQ"), then it sees its node's cni0 address.
    # 50 requests miss web-1's own endpoint with probability (3/4)^50 = 5.7e-7.
    tally = live.send(env, "web-1", *WEB, 50)
    assert dict(tally.seen_clients["web-1"]).keys() == {"10.244.1.1"}
    for pod in WEB_PODS - {"web-1"}:
        assert set(tally.seen_clients.get(pod, {})) <= {"10.244.1.2"}
    assert len(tally.answered) == 4
    # From node1 (outside the cluster CIDR): "! -s 10.244.0.0/16 -j KUBE-MARK-MASQ", then
    # MASQUERADE picks the outgoing interface's address: cni0 for local pods, eth0 for node2's.
    tally = live.send(env, "node1", *WEB, 50)
    for pod, clients in tally.seen_clients.items():
        assert set(clients) == ({"10.244.1.1"} if pod in ("web-1", "web-2") else {NODE1}), (pod, clients)


def test_node_port_with_external_traffic_policy_cluster(env):
    # shop-cluster's pods both run on node1; every node answers and masquerades.
    # 2 nodes x 2 pods, each missed with probability (1/2)^n: 4 * (1/2)^22 = 9.5e-7 < 1e-6.
    for node_ip, seen in ((NODE1, "10.244.1.1"), (NODE2, NODE2)):
        tally = live.send(env, "client", node_ip, 30100, 22)
        assert tally.ok == 22 and set(tally.answered) == {"shop-1", "shop-2"}
        assert {a for c in tally.seen_clients.values() for a in c} == {seen}


def test_node_port_with_external_traffic_policy_local(env):
    # node1 has local endpoints: it answers and the pod sees the client's own address.
    tally = live.send(env, "client", NODE1, 30101, 20)
    assert tally.ok == 20
    assert {a for c in tally.seen_clients.values() for a in c} == {CLIENT}
    # node2 has none: filter KUBE-EXTERNAL-SERVICES drops the packets (no answer, no refusal).
    tally = live.send(env, "client", NODE2, 30101, 3, timeout=0.5, parallel=3)
    assert tally.ok == 0 and dict(tally.failures) == {"timeout": 3}
    # ... but node2's own traffic ("route LOCAL traffic" in KUBE-EXT) still reaches node1's pods,
    # masqueraded, also on 127.0.0.1 (localhost NodePorts, route_localnet).
    for target in (NODE2, "127.0.0.1"):
        tally = live.send(env, "node2", target, 30101, 10)
        assert tally.ok == 10 and {a for c in tally.seen_clients.values() for a in c} == {NODE2}


def test_node_port_cluster_policy_from_the_client_reaches_pods_on_both_nodes(env):
    # api: one pod on node1, two on node2; through either node all three answer.
    # 2 nodes x 3 pods, each missed with probability (2/3)^n: 6 * (2/3)^40 = 5.4e-7 < 1e-6.
    for node_ip in (NODE1, NODE2):
        tally = live.send(env, "client", node_ip, 30090, 40)
        assert tally.ok == 40 and set(tally.answered) == {"api-1", "api-2", "api-3"}


def test_an_unprogrammed_service_gets_no_rules_and_no_answer(env):
    # legacy carries service.kubernetes.io/service-proxy-name: kube-proxy does not watch it.
    assert "10.96.0.30" not in save(env.netns_name("node1"), "nat")
    tally = live.send(env, "web-1", "10.96.0.30", 80, 1, timeout=0.5)
    assert dict(tally.failures) == {"timeout": 1}


def test_session_affinity_applied_with_the_cli(env, lab, tmp_path):
    svc = live.load(env).service("api")
    svc["spec"]["sessionAffinity"] = "ClientIP"
    path = tmp_path / "api.yaml"
    path.write_text(yaml.safe_dump(svc))
    out = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0).stdout
    assert "service/api configured" in out and "node1: kube-proxy synced (rewrote the chains of default/api)" in out
    rules = save(env.netns_name("node2"), "nat")
    assert "--rcheck --seconds 10800 --reap --name KUBE-SEP-" in rules
    # Sticky: every request of a client after its first goes where the first went (no chance).
    # Spread: 14 clients' first requests pick among 3 pods; all the same with 3 * 3^-14 = 6.3e-7.
    chosen = set()
    for i in range(14):
        tally = live.send(env, "client", (NODE1, NODE2)[i % 2], 30090, 4, source=f"192.168.50.{101 + i}")
        assert tally.ok == 4 and len(tally.answered) == 1, tally.answered
        chosen |= set(tally.answered)
    assert len(chosen) > 1


def test_a_service_without_endpoints_is_rejected(env, lab, tmp_path):
    path = tmp_path / "nothing.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nothing"},
                                    "spec": {"selector": {"app": "none"}, "clusterIP": "10.96.0.77",
                                             "ports": [{"port": 80}]}}))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    filter_rules = save(env.netns_name("node1"), "filter")
    assert '"default/nothing has no endpoints"' in filter_rules and "-j REJECT" in filter_rules
    tally = live.send(env, "web-1", "10.96.0.77", 80, 2)
    assert dict(tally.failures) == {"refused": 2}


def test_a_partial_sync_leaves_other_services_chains_alone(env, lab, tmp_path):
    # debug-ruleset's damage to catalog on node2 survives syncs that change other Services.
    before = parse(save(env.netns_name("node2"), "nat")).table("nat")
    path = tmp_path / "web.yaml"
    web = live.load(env).service("web")
    web["spec"]["type"] = "NodePort"
    path.write_text(yaml.safe_dump(web))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    after = parse(save(env.netns_name("node2"), "nat")).table("nat")
    catalog = [c for c in before.chains if c.startswith("KUBE-SVC-") and any(
        r.comment and "default/catalog:http" in r.comment for r in before.chain(c).rules)]
    assert len(catalog) == 1
    assert [r.text for r in before.chain(catalog[0]).rules] == [r.text for r in after.chain(catalog[0]).rules]
    assert not any(r.comment == "default/web:http" for r in before.chain("KUBE-NODEPORTS").rules)
    assert any(r.comment == "default/web:http" for r in after.chain("KUBE-NODEPORTS").rules)


def test_curl_command_reports_pods_counts_and_seen_addresses(lab):
    out = json.loads(labkit("kube-proxy", "curl", "--from", "client", "--to", f"{NODE2}:30100", "-n", "5",
                            "--json", env=lab, check=0).stdout)
    assert out["sent"] == 5 and out["ok"] == 5 and out["failed"] == {}
    assert {p["node"] for p in out["pods"].values()} == {"node1"}
    assert all(p["clients"] == {NODE2: p["count"]} for p in out["pods"].values())
    text = labkit("kube-proxy", "curl", "--from", "web-3", "--to", "web", "-n", "8", env=lab, check=0).stdout
    assert "8 requests from web-3 to Service default/web (10.96.0.10:80): 8 answered" in text
    failed = labkit("kube-proxy", "curl", "--from", "client", "--to", f"{NODE2}:30101", "-n", "1",
                    "--timeout", "0.3", env=lab, check=1)
    assert "failed: timeout ×1" in failed.stdout
    unknown = labkit("kube-proxy", "curl", "--from", "client", "--to", "nope", env=lab, check=2)
    assert "no Service 'nope'" in unknown.stderr and "Traceback" not in unknown.stderr


def test_graph_command_draws_the_live_chains(lab, tmp_path):
    out = labkit("kube-proxy", "graph", "--node", "node1", "--service", "web", "-o", str(tmp_path / "g.svg"),
                 env=lab, check=0).stdout
    assert out.startswith("nat PREROUTING\n└─ KUBE-SERVICES")
    assert "DNAT --to-destination 10.244.2.3:8080" in out and "probability 0.25" in out
    assert "catalog" not in out
    assert (tmp_path / "g.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    dot = tmp_path / "g.dot"
    labkit("kube-proxy", "graph", "--node", "node2", "-o", str(dot), env=lab, check=0)
    assert dot.read_text().startswith("digraph chains {") and "KUBE-POSTROUTING" in dot.read_text()


def test_apply_of_a_malformed_file_is_one_clear_line(lab, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Service\nmetadata: {name: bad}\nspec: {type: NodePort, ports: [{port: 80, nodePort: 12}]}\n")
    result = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=2)
    assert result.stderr.strip() == (f"labkit: {path}: documents[0].spec.ports[0].nodePort: "
                                     "expected a port in 30000-32767, got 12")


def test_get_and_shell(lab):
    services = labkit("kube-proxy", "get", "services", env=lab, check=0).stdout
    assert "legacy" in services and "label service.kubernetes.io/service-proxy-name" in services
    pods = yaml.safe_load(labkit("kube-proxy", "get", "pods", "web-3", "-o", "yaml", env=lab, check=0).stdout)
    assert pods["status"]["podIP"] == "10.244.2.2" and pods["spec"]["nodeName"] == "node2"
    saved = labkit("shell", "kube-proxy", "node1", "--", "iptables-save", "-t", "nat", env=lab, check=0).stdout
    assert "-A KUBE-SERVICES" in saved and "iptables-save v" in saved
    # the lab's namespaces carry the labkit prefix and show in `ip netns`
    names = subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
    assert f"{lab['LABKIT_PREFIX']}-kube-proxy-node1" in names
