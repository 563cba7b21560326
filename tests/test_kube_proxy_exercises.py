"""Every exercise of the kube-proxy lab: its check fails on a fresh lab and passes after its
reference solution, through the real CLI. And kube-proxy owns its chains: hand-made rules survive
an apply that changes nothing kube-proxy cares about, and go at the next real sync."""

import json

import pytest
import yaml

from kube_proxy_support import kube_proxy_lab
from support import labkit

from labkit.paths import BUILTIN_LABS

# The lab's order: clusterip-by-hand last, since every sync deletes hand-made KUBE-SVC/SEP chains.
EXERCISES = ["follow-the-chain", "nodeport", "session-affinity", "traffic-policy", "hairpin",
             "debug-ruleset", "clusterip-by-hand"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with kube_proxy_lab(tmp_path_factory.mktemp("kube-proxy-exercises")) as env:
        yield env


def results(lab, *exercise):
    out = labkit("check", "kube-proxy", *exercise, "-o", "json", env=lab)
    return {r["exercise"]: r for r in json.loads(out.stdout)["results"]}


def test_each_check_fails_on_a_fresh_lab_and_passes_after_its_solution(lab):
    assert [e["id"] for e in yaml.safe_load((BUILTIN_LABS / "kube-proxy" / "lab.yaml").read_text())["exercises"]] == EXERCISES
    fresh = results(lab)
    assert {e: r["status"] for e, r in fresh.items()} == {e: "fail" for e in EXERCISES}, fresh
    # the debug exercise fails on what node2's rules do that kube-proxy's would not (the DNAT to the wrong port)
    assert "on node2" in fresh["debug-ruleset"]["message"] and ":8081, where kube-proxy's rules never send it" in \
        fresh["debug-ruleset"]["message"]
    for exercise in EXERCISES:
        labkit("solve", "kube-proxy", exercise, env=lab, check=0)
        result = results(lab, exercise)[exercise]
        assert result["status"] == "pass", result
    # solutions do not undo each other: everything passes together
    final = json.loads(labkit("check", "kube-proxy", "-o", "json", env=lab, check=0).stdout)
    assert final["passed"] == len(EXERCISES)


def test_kube_proxy_owns_its_chains(lab, tmp_path):
    """After the exercise above: hand-made chains for `legacy` are in place."""
    assert results(lab, "clusterip-by-hand")["clusterip-by-hand"]["status"] == "pass"
    shop = yaml.safe_load(labkit("kube-proxy", "get", "services", "shop-cluster", "-o", "yaml", env=lab, check=0).stdout)
    # a change kube-proxy does not care about (a label): no sync, the hand-made rules stay
    shop["metadata"].setdefault("labels", {})["team"] = "shop"
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(shop))
    out = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0).stdout
    assert "service/shop-cluster configured" in out and "node1: no service changed, no sync" in out
    assert results(lab, "clusterip-by-hand")["clusterip-by-hand"]["status"] == "pass"
    # a real change: kube-proxy syncs, rewrites KUBE-SERVICES and deletes the chains it does not know
    shop["spec"]["sessionAffinity"] = "ClientIP"
    path.write_text(yaml.safe_dump(shop))
    out = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0).stdout
    assert "rewrote the chains of default/shop-cluster" in out
    after = results(lab, "clusterip-by-hand")["clusterip-by-hand"]
    assert after["status"] == "fail" and "has no KUBE-SVC chain with kube-proxy's name" in after["message"]
    # the check never names the chain the student is asked to compute
    from labkit.kubeproxy.chains import service_chain
    assert service_chain("default/legacy:http", "tcp") not in json.dumps(after)


def test_kube_proxys_own_rules_restored_after_a_reset_pass_on_record(lab, monkeypatch):
    """kube-proxy programs legacy while its label is off; the student keeps a copy of every node's
    rules, is told so by the check, resets the exercise and restores the copy. Nothing tells those
    rules from hand-written ones: the pass says kube-proxy wrote them before the reset, and the
    grade report keeps when."""
    import importlib.util

    from kube_proxy_support import use
    from labkit.netfilter import restore, save

    env = use(monkeypatch, lab)
    path = BUILTIN_LABS / "kube-proxy" / "mistakes" / "clusterip-by-hand.py"
    spec = importlib.util.spec_from_file_location("kube_proxy_clusterip_mistakes", path)
    mistakes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mistakes)
    labkit("reset", "kube-proxy", "clusterip-by-hand", "--yes", env=lab, check=0)
    mistakes.copies_kube_proxys_own_rules(env)
    copied = results(lab, "clusterip-by-hand")["clusterip-by-hand"]
    assert copied["status"] == "fail" and "label was off" in copied["message"], copied
    kept = {node: save(env.netns_name(node)) for node in ("node1", "node2")}
    labkit("reset", "kube-proxy", "clusterip-by-hand", "--yes", env=lab, check=0)
    for node, text in kept.items():
        restore(env.netns_name(node), text, noflush=False)
    after = results(lab, "clusterip-by-hand")["clusterip-by-hand"]
    assert after["status"] == "pass", after
    assert "kube-proxy itself had programmed legacy on node" in after["message"]
    assert "before the exercise was last reset: the grade report keeps that it did" in after["message"]
    record = after["details"]["kube_proxy_programmed_before_reset"]
    assert {r["node"] for r in record} == {"node1", "node2"} and all(r["time"] > 0 for r in record)


def test_a_reset_of_nodeport_lists_and_reverts_rules_in_raw_and_the_students_own_node_port(lab, tmp_path, monkeypatch):
    """The mangle and raw tables belong to no exercise: a rule typed there is judged as written by
    hand, and a reset of an exercise that judges rules lists it, keeps a copy of the node's rules and
    puts the tables back as built. A Service of the student's own that opens web's pods on another
    node port is nodeport's work too: listed, kept in saved/, deleted."""
    from pathlib import Path

    from kube_proxy_support import use
    from labkit.netfilter import parse, save

    env = use(monkeypatch, lab)
    labkit("reset", "kube-proxy", "nodeport", "--yes", env=lab, check=0)
    labkit("solve", "kube-proxy", "nodeport", env=lab, check=0)
    assert results(lab, "nodeport")["nodeport"]["status"] == "pass"
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "raw", "-A", "PREROUTING", "-s", "192.168.50.116",
           "-p", "tcp", "--dport", "30080", "-j", "DROP", env=lab, check=0)
    raw = results(lab, "nodeport")["nodeport"]
    assert raw["status"] == "fail" and "node1's raw table" in raw["message"], raw
    extra = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-extra", "namespace": "default"},
             "spec": {"type": "NodePort", "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30081}]}}
    path = tmp_path / "extra.yaml"
    path.write_text(yaml.safe_dump(extra))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    asked = labkit("reset", "kube-proxy", "nodeport", env=lab, check=2)
    assert "raw PREROUTING" in asked.stderr and "Service default/web-extra of yours" in asked.stderr, asked.stderr
    done = labkit("reset", "kube-proxy", "nodeport", "--yes", env=lab, check=0)
    saved = [Path(line.split(": ", 1)[1]) for line in done.stdout.splitlines() + done.stderr.splitlines()
             if line.startswith("your ") and "before the reset: " in line]
    assert any(p.name.startswith("nodeport-service-web-extra") and "30081" in p.read_text() for p in saved), saved
    assert any(p.name.startswith("nodeport-node1") and "192.168.50.116" in p.read_text() for p in saved), saved
    rules = parse(save(env.netns_name("node1")))
    assert not (rules.table("raw") and any(c.rules for c in rules.table("raw").chains.values()))
    services = labkit("kube-proxy", "get", "services", env=lab, check=0).stdout
    assert "web-extra" not in services
