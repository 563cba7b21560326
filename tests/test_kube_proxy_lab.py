"""The live kube-proxy lab with real packets: ClusterIP, NodePort, both external traffic policies,
masquerading, session affinity, services without endpoints, and the lab's commands.

Statistical assertions send enough requests that a correct setup fails them with probability
below 1e-6 (computation next to each sample size).
"""

import json
import subprocess
import sys
import time

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
    # the shop NodePorts from the client show what traffic-policy asks to predict: predicted first
    labkit("solve", "kube-proxy", "traffic-policy", env=lab, check=0)
    out = json.loads(labkit("kube-proxy", "curl", "--from", "client", "--to", f"{NODE2}:30100", "-n", "5",
                            "-o", "json", env=lab, check=0).stdout)
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
    dot = labkit("kube-proxy", "graph", "--node", "node2", "-o", "dot", env=lab, check=0).stdout
    assert dot.startswith("digraph chains {") and "KUBE-POSTROUTING" in dot
    png = tmp_path / "g.png"
    labkit("kube-proxy", "graph", "--node", "node2", "-o", "png", "--output-file", str(png), env=lab, check=0)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_apply_of_a_malformed_file_is_one_clear_line(lab, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Service\nmetadata: {name: bad}\nspec: {type: NodePort, ports: [{port: 80, nodePort: 12}]}\n")
    result = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=2)
    # kube-apiserver v1.34's words, as kubectl prints them (the port allocator's ErrNotInRange)
    assert result.stderr.strip() == (f'labkit: {path}: The Service "bad" is invalid: spec.ports[0].nodePort: '
                                     "Invalid value: 12: provided port is not in the valid range. The range of valid "
                                     "ports is 30000-32767")


def test_render_withholds_legacys_rules_until_clusterip_by_hand_has_passed(env, lab, tmp_path):
    # legacy without its service-proxy-name label, rendered, is clusterip-by-hand's whole answer
    service = yaml.safe_load(labkit("kube-proxy", "get", "services", "legacy", "-o", "yaml", env=lab, check=0).stdout)
    service["metadata"]["labels"] = {}
    slices = yaml.safe_load_all(labkit("kube-proxy", "get", "endpointslices", "-o", "yaml", env=lab, check=0).stdout)
    legacy_slices = [s for s in slices if s["metadata"]["labels"]["kubernetes.io/service-name"] == "legacy"]
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump_all([service, *legacy_slices]))
    refused = labkit("kube-proxy", "render", "-f", str(path), "--hostname", "node1", env=lab, check=2)
    assert refused.stdout == "" and "KUBE-SVC-" not in refused.stderr
    assert refused.stderr.startswith("labkit: kube-proxy's rules for default/legacy:http withheld: exercise "
                                     "clusterip-by-hand of lab kube-proxy asks you to write them yourself")
    # renamed to another protocol, its comments still carry the service port name
    service["spec"]["ports"][0]["protocol"] = "UDP"
    path.write_text(yaml.safe_dump_all([service, *legacy_slices]))
    assert "withheld" in labkit("kube-proxy", "render", "-f", str(path), env=lab, check=2).stderr
    # a file without legacy renders; so does legacy once the exercise has passed
    web = tmp_path / "web.yaml"
    web.write_text(labkit("kube-proxy", "get", "services", "web", "-o", "yaml", env=lab, check=0).stdout)
    assert "default/web:http has no endpoints" in labkit("kube-proxy", "render", "-f", str(web), env=lab, check=0).stdout
    credit = env.state.dir / "credit.json"
    before = credit.read_bytes() if credit.exists() else None
    credit.write_text(json.dumps({**env.state.credit, "clusterip-by-hand": {"at": time.time(), "points": 5}}))
    service["spec"]["ports"][0]["protocol"] = "TCP"
    path.write_text(yaml.safe_dump_all([service, *legacy_slices]))
    try:
        shown = labkit("kube-proxy", "render", "-f", str(path), "--hostname", "node1", env=lab, check=0).stdout
        assert '"default/legacy:http cluster IP"' in shown
    finally:
        credit.write_bytes(before) if before is not None else credit.unlink()


def test_render_withholds_catalogs_rules_until_debug_ruleset_has_passed(env, lab, tmp_path):
    # the whole cluster rendered for node2 and restored there repairs catalog's chains as
    # kube-proxy's full sync would: debug-ruleset asks to find the damage and repair it by hand
    services = labkit("kube-proxy", "get", "services", "-o", "yaml", env=lab, check=0).stdout
    slices = labkit("kube-proxy", "get", "endpointslices", "-o", "yaml", env=lab, check=0).stdout
    docs = [d for d in [*yaml.safe_load_all(services), *yaml.safe_load_all(slices)] if d]
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    refused = labkit("kube-proxy", "render", "-f", str(path), "--hostname", "node2", env=lab, check=2)
    assert refused.stdout == "" and "KUBE-SVC-" not in refused.stderr
    assert refused.stderr.startswith("labkit: kube-proxy's rules for default/catalog:http withheld: exercise "
                                     "debug-ruleset of lab kube-proxy asks you to find what is wrong")
    # without catalog (and legacy, withheld for clusterip-by-hand) the rest renders
    names = ("catalog", "legacy")
    rest = [d for d in docs if d["metadata"]["name"] not in names
            and (d.get("metadata", {}).get("labels") or {}).get("kubernetes.io/service-name") not in names]
    path.write_text(yaml.safe_dump_all(rest))
    assert '"default/web:http cluster IP"' in labkit("kube-proxy", "render", "-f", str(path), env=lab, check=0).stdout
    credit = env.state.dir / "credit.json"
    before = credit.read_bytes() if credit.exists() else None
    credit.write_text(json.dumps({**env.state.credit, "debug-ruleset": {"at": time.time(), "points": 4},
                                  "clusterip-by-hand": {"at": time.time(), "points": 5}}))
    path.write_text(yaml.safe_dump_all(docs))
    try:
        shown = labkit("kube-proxy", "render", "-f", str(path), "--hostname", "node2", env=lab, check=0).stdout
        assert '"default/catalog:http cluster IP"' in shown
    finally:
        credit.write_bytes(before) if before is not None else credit.unlink()


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


# -- the node around kube-proxy's rules ------------------------------------------------------------


def test_pod_bridges_pass_traffic_to_iptables_and_break_without_it(env):
    """bridge-nf-call-iptables=1 in each node (set by the lab, per namespace). Turned off in node1,
    a pod reaching a Service endpoint on its own bridge gets the reply straight from the pod,
    past conntrack, and the connection fails; the lab then counts as broken (`labkit run` rebuilds)."""
    from labkit.kubeproxy.node import node_sysctls
    from labkit.netlab import run_in

    for node in ("node1", "node2"):
        assert node_sysctls(env.netns_name(node))["net.bridge.bridge-nf-call-iptables"] == "1"
    netns = env.netns_name("node1")
    run_in(netns, ["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0"])
    try:
        assert not live.is_up(env)
        # web-2 (a quarter of the picks from web-1) is on web-1's bridge: some request fails
        # unless none of 50 picks it, with probability (3/4)^50 = 5.7e-7.
        tally = live.send(env, "web-1", *WEB, 50, timeout=0.5, parallel=10)
        assert tally.failures and "web-2" not in tally.answered, describe(tally)
    finally:
        run_in(netns, ["sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"])
    assert live.is_up(env)


def describe(tally):
    return f"answered {dict(tally.answered)}, failed {dict(tally.failures)}"


def test_nodes_carry_kubelets_chains_and_kube_proxys_canaries_and_sysctls(env):
    saved = {table: save(env.netns_name("node1"), table) for table in ("mangle", "nat", "filter")}
    assert ":KUBE-IPTABLES-HINT - [0:0]" in saved["mangle"]
    for table in ("mangle", "nat", "filter"):
        assert ":KUBE-KUBELET-CANARY - [0:0]" in saved[table] and ":KUBE-PROXY-CANARY - [0:0]" in saved[table]
    filter_ = parse(saved["filter"]).table("filter")
    for chain in ("INPUT", "OUTPUT"):
        # kubelet made its jump first; kube-proxy's later prepends push it to the end, as on a real node
        assert filter_.chain(chain).rules[-1].text == f"-A {chain} -j KUBE-FIREWALL"
        assert len(filter_.chain(chain).rules) > 1
    from labkit.kubeproxy.node import node_sysctls
    values = node_sysctls(env.netns_name("node2"))
    assert values["net.netfilter.nf_conntrack_tcp_timeout_established"] == "86400"
    assert values["net.netfilter.nf_conntrack_tcp_timeout_close_wait"] == "3600"
    assert ":KUBE-IPTABLES-HINT - [0:0]" in save(env.netns_name("node1"), "mangle", family="IPv6")


def test_a_lost_canary_makes_the_next_sync_a_full_one(env, lab, tmp_path):
    """kube-proxy's iptables monitor notices its mangle canary gone and resyncs fully: hand-made
    changes in per-service chains of node1 go, even on an apply that changes nothing else."""
    from labkit.netlab import run_in

    netns = env.netns_name("node1")
    web_chain = next(r.target for r in parse(save(netns, "nat")).table("nat").chain("KUBE-SERVICES").rules
                     if r.comment == "default/web:http cluster IP")
    run_in(netns, ["iptables-legacy", "-w", "-t", "nat", "-A", web_chain, "-j", "RETURN"])
    run_in(netns, ["iptables-legacy", "-w", "-t", "mangle", "-X", "KUBE-PROXY-CANARY"])
    shop = live.load(env).service("shop-cluster")
    shop["metadata"].setdefault("labels", {})["owner"] = "canary-test"
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(shop))
    out = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0).stdout
    assert "node1: kube-proxy synced fully (its canary chain" in out and "node2: no service changed, no sync" in out
    nat = parse(save(netns, "nat")).table("nat")
    assert all(r.target != "RETURN" for r in nat.chain(web_chain).rules)
    assert ":KUBE-PROXY-CANARY - [0:0]" in save(netns, "mangle")


def test_pods_reach_machines_outside_the_cluster_through_the_cnis_masquerade(env):
    """The client has no route to pod addresses: a pod's request reaches it only because the node
    masquerades pod traffic leaving the pod network (KIND-MASQ-AGENT)."""
    from labkit.netlab import cluster as netcluster

    server = subprocess.Popen(["nsenter", f"--net=/run/netns/{env.netns_name('client')}", "--", sys.executable, "-I",
                               "-S", str(netcluster.WHOAMI), "--pod", "outside", "--node", "none", "--port", "9999"])
    try:
        deadline = time.monotonic() + 10
        while True:           # until the server listens
            tally = live.send(env, "web-1", CLIENT, 9999, 1, timeout=1.0)
            if tally.ok or time.monotonic() > deadline:
                break
        assert tally.ok == 1 and dict(tally.seen_clients["outside"]) == {NODE1: 1}
    finally:
        server.kill()
        server.wait()


def test_a_later_packet_is_traced_with_its_conntrack_entry(env, lab):
    """`labkit trace --ctstate ESTABLISHED` on a live node skips the nat table and takes the
    DNAT the connection's first packet got from the node's conntrack table."""
    # a source port below the ephemeral range, so no other connection in the lab's tests shares it
    code = ("import socket,time; s=socket.socket(); s.bind(('10.244.1.2', 31234)); "
            "s.connect(('10.96.0.10', 80)); print('up', flush=True); time.sleep(20)")
    holder = subprocess.Popen(["nsenter", f"--net=/run/netns/{env.netns_name('web-1')}", "--", sys.executable, "-c", code],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        # the node's table read over ctnetlink in the node, as `conntrack -L` does (not through labkit)
        dump = ("from pyroute2 import Conntrack\nwith Conntrack() as ct:\n    for e in ct.dump_entries():\n"
                "        if (e.tuple_orig.saddr, e.tuple_orig.sport, e.tuple_orig.daddr, e.tuple_orig.dport)"
                " == ('10.244.1.2', 31234, '10.96.0.10', 80):\n"
                "            print(e.tuple_reply.saddr, e.tuple_reply.sport)")
        endpoint = ":".join(subprocess.run(["nsenter", f"--net=/run/netns/{env.netns_name('node1')}", "--", sys.executable,
                                            "-c", dump], capture_output=True, text=True, check=True).stdout.split())
        assert endpoint.startswith("10.244.") and endpoint.endswith(":8080"), endpoint
        result = json.loads(labkit("trace", "--node", "node1", "--src", "10.244.1.2", "--sport", "31234", "--dst",
                                   "10.96.0.10:80", "--ctstate", "ESTABLISHED", "-o", "json", env=lab, check=0).stdout)
        assert result["dnat"] == [{"target": endpoint, "probability": 1.0}]
        assert not any("statistic" in s["text"] for s in result["branches"][0]["steps"])
        assert result["summary"].startswith(f"summary: DNAT to {endpoint}, accepted")
    finally:
        holder.kill()
        holder.wait()


def test_kubectl_habits_in_the_labs_own_commands(env, lab, tmp_path):
    """apply -f - and -f DIR, get svc/NAME, -o name and -o wide, get -w, delete svc/NAME and
    delete -f FILE, as kubectl takes them; a deleted Service's chains leave the nodes."""
    from support import LABKIT

    doc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "habits", "namespace": "default"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 8181, "targetPort": 8080}]}}
    text = yaml.safe_dump(doc)
    assert "service/habits created" in labkit("kube-proxy", "apply", "-f", "-", input=text, env=lab, check=0).stdout
    assert labkit("kube-proxy", "get", "svc/habits", "-o", "name", env=lab, check=0).stdout == "service/habits\n"
    wide = labkit("kube-proxy", "get", "services", "habits", "-o", "wide", env=lab, check=0).stdout.splitlines()
    assert wide[0].split()[:3] == ["NAME", "TYPE", "CLUSTER-IP"] and wide[1].split()[:2] == ["habits", "ClusterIP"]
    cluster_ip = wide[1].split()[2]
    assert f"-d {cluster_ip}/32" in save(env.netns_name("node1"), "nat")          # kube-proxy's rules for it
    watcher = subprocess.Popen(LABKIT + ["kube-proxy", "get", "svc/habits", "-w", "-o", "name"], env=lab,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout.readline() == "service/habits\n"          # the list
        deleted = labkit("kube-proxy", "delete", "svc/habits", env=lab, check=0).stdout
        assert deleted.startswith('service "habits" deleted\n') and "node1: kube-proxy synced" in deleted
        assert watcher.stdout.readline() == "service/habits\n"          # and the deletion, watched
    finally:
        watcher.kill()
        watcher.wait()
    assert f"-d {cluster_ip}/32" not in save(env.netns_name("node1"), "nat")
    assert 'services "habits" not found' in labkit("kube-proxy", "get", "svc", "habits", env=lab, check=2).stderr
    (tmp_path / "habits.yaml").write_text(text)
    assert "service/habits created" in labkit("kube-proxy", "apply", "-f", str(tmp_path), env=lab, check=0).stdout
    assert labkit("kube-proxy", "delete", "-f", str(tmp_path / "habits.yaml"), env=lab,
                  check=0).stdout.startswith('service "habits" deleted\n')
    missing = labkit("kube-proxy", "delete", "svc", "habits", env=lab, check=2)
    assert 'Error from server (NotFound): services "habits" not found' in missing.stderr
    assert "fixed by the lab" in labkit("kube-proxy", "delete", "pods", "web-1", env=lab, check=2).stderr


def test_a_nodes_conntrack_entry_is_read_over_ctnetlink(env, lab):
    """labkit.netfilter.conntrack reads the node's table over ctnetlink in the node's namespace:
    node1's own connection to the ClusterIP was DNATed to an endpoint and masqueraded ("! -s
    10.244.0.0/16 -j KUBE-MARK-MASQ"); a connection the node never saw has no entry."""
    from labkit.netfilter import conntrack

    code = ("import socket,time; s=socket.socket(); s.bind(('192.168.50.11', 41235)); "
            "s.connect(('10.96.0.10', 80)); print('up', flush=True); time.sleep(20)")
    holder = subprocess.Popen(["nsenter", f"--net=/run/netns/{env.netns_name('node1')}", "--", sys.executable, "-c", code],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        [found] = conntrack.entries(env.netns_name("node1"), "tcp", NODE1, 41235)
        assert found["original"] == {"src": NODE1, "dst": "10.96.0.10", "sport": 41235, "dport": 80}
        assert found["reply"]["src"].startswith("10.244.") and found["reply"]["sport"] == 8080
        entry = conntrack.entry(env.netns_name("node1"), "tcp", NODE1, 41235, "10.96.0.10", 80)
        assert entry.dnat == f"{found['reply']['src']}:8080" and entry.masquerade
        result = json.loads(labkit("trace", "--node", "node1", "--src", NODE1, "--sport", "41235", "--dst",
                                   "10.96.0.10:80", "--ctstate", "ESTABLISHED", "-o", "json", env=lab, check=0).stdout)
        assert result["dnat"] == [{"target": entry.dnat, "probability": 1.0}]
        assert any("source NAT (from the conntrack entry)" in s["text"] for s in result["branches"][0]["steps"])
        # the conntrack tool in the node (scripts/setup installs it) lists the same entry
        listed = labkit("shell", "kube-proxy", "node1", "--", "conntrack", "-L", "-p", "tcp", "--sport", "41235",
                        env=lab, check=0).stdout
        assert f"src={NODE1} dst=10.96.0.10 sport=41235 dport=80" in listed
        assert f"src={found['reply']['src']} dst={found['reply']['dst']} sport=8080 dport=" in listed
        assert conntrack.entry(env.netns_name("node1"), "tcp", NODE1, 41236, "10.96.0.10", 80) is None
        assert conntrack.entry(env.netns_name("node2"), "tcp", NODE1, 41235, "10.96.0.10", 80) is None
    finally:
        holder.kill()
        holder.wait()


def test_load_balancer_with_local_policy_gets_a_health_check_node_port_and_server(env, lab, tmp_path):
    """healthCheckNodePort allocated by the API server, an ACCEPT rule in filter KUBE-NODEPORTS, and
    kube-proxy's health server answering 200 where the Service has local endpoints, 503 elsewhere.
    The load balancer's address comes in through the status subresource; an apply keeps it."""
    from labkit.netlab.traffic import http_requests

    doc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop-lb", "namespace": "default"},
           "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "selector": {"app": "shop"},
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}
    path = tmp_path / "lb.yaml"
    path.write_text(yaml.safe_dump(doc))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    status = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop-lb"},
              "status": {"loadBalancer": {"ingress": [{"ip": "192.168.50.200"}]}}}
    path.write_text(yaml.safe_dump(status))
    assert "service/shop-lb configured (status)" in labkit("kube-proxy", "apply", "--subresource", "status", "-f",
                                                           str(path), env=lab, check=0).stdout
    doc["spec"]["sessionAffinity"] = "None"
    doc["status"] = {"loadBalancer": {}}
    path.write_text(yaml.safe_dump(doc))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    svc = live.load(env).service("shop-lb")
    assert svc["status"]["loadBalancer"]["ingress"] == [{"ip": "192.168.50.200"}]
    port = svc["spec"]["healthCheckNodePort"]
    assert f'"default/shop-lb:http health check node port" -m tcp --dport {port} -j ACCEPT' in save(env.netns_name("node2"), "filter")
    assert '"default/shop-lb:http loadbalancer IP"' in save(env.netns_name("node1"), "nat")
    for node_ip, code, count in ((NODE1, 200, 2), (NODE2, 503, 0)):
        [reply] = http_requests(env.netns_name("client"), node_ip, port, 1, timeout=2.0)
        assert reply["status"] == code and reply["body"]["localEndpoints"] == count, reply
        assert reply["body"]["service"] == {"namespace": "default", "name": "shop-lb"}


def test_graph_of_a_service_shows_its_hand_written_rules_without_comments(env, lab):
    from labkit.kubeproxy.chains import service_chain
    from labkit.netlab import run_in

    netns = env.netns_name("node2")
    chain = service_chain("default/legacy:http", "tcp")
    iptables = lambda *a: run_in(netns, ["iptables-legacy", "-w", "-t", "nat", *a])
    iptables("-N", chain)
    iptables("-A", chain, "-p", "tcp", "-j", "DNAT", "--to-destination", "10.244.2.4:9376")
    iptables("-I", "KUBE-SERVICES", "1", "-d", "10.96.0.30", "-p", "tcp", "--dport", "80", "-j", chain)
    try:
        out = labkit("kube-proxy", "graph", "--node", "node2", "--service", "legacy", env=lab, check=0).stdout
        assert chain in out and "DNAT --to-destination 10.244.2.4:9376" in out
        assert "default/web" not in out
    finally:
        iptables("-D", "KUBE-SERVICES", "1")
        iptables("-F", chain)
        iptables("-X", chain)
