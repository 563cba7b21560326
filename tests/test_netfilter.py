"""The ruleset parser, the tracer's kernel semantics, and the CLI (`labkit kube-proxy render`,
`labkit trace` on a saved file and on a running lab's node)."""

from __future__ import annotations

import json

import pytest
import yaml

from kubeproxy_cases import case_files, lab_namespace, load_case, proxier_config
from labkit.kubeproxy import load_objects, render
from labkit.kubeproxy.sync import sync_node
from labkit.netfilter import Packet, Tracer, load, parse, parse_rule
from support import labkit

RESTORE_FORM = ('-A KUBE-SVC-X -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp -p tcp -d 172.30.0.44 '
                '--dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ')
SAVE_FORM = ('-A KUBE-SVC-X ! -s 10.0.0.0/8 -d 172.30.0.44/32 -p tcp -m comment --comment "ns4/svc4:p80 cluster IP" '
             '-m tcp --dport 80 -j KUBE-MARK-MASQ')


def _shape(rule):
    return sorted((c.kind, c.negated, str(c.value)) for c in rule.conds), rule.target, rule.comment


def test_restore_and_save_forms_parse_alike():
    assert _shape(parse_rule(RESTORE_FORM)) == _shape(parse_rule(SAVE_FORM))
    a = parse_rule("-A S -m recent --name KUBE-SEP-A --rcheck --seconds 10800 --reap -j KUBE-SEP-A")
    b = parse_rule("-A S -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-A --mask 255.255.255.255 --rsource -j KUBE-SEP-A")
    assert a.cond("recent").value["name"] == b.cond("recent").value["name"] == "KUBE-SEP-A"
    assert a.cond("recent").value["action"] == b.cond("recent").value["action"] == "rcheck"
    p10 = parse_rule("-A S -m statistic --mode random --probability 0.3333333333 -j X").cond("statistic").value["p"]
    p11 = parse_rule("-A S -m statistic --mode random --probability 0.33333333349 -j X").cond("statistic").value["p"]
    assert abs(p10 - p11) < 1e-9
    nfacct = parse_rule("-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP")
    assert nfacct.cond("nfacct").value == "ct_state_invalid_dropped_pkts"
    fake = parse_rule("-A PREROUTING -m comment --comment kubernetes service portals -j KUBE-SERVICES")
    assert fake.comment == "kubernetes service portals" and fake.target == "KUBE-SERVICES"


def test_mark_forms_act_alike():
    # MARK --or-mark 0x4000 (kube-proxy) and --set-xmark 0x4000/0x4000 (iptables-save) set the same bit.
    for mark_rule in ("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000", "-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000"):
        text = ("*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:KUBE-MARK-MASQ - [0:0]\n"
                "-A PREROUTING -j KUBE-MARK-MASQ\n"
                f"{mark_rule}\n"
                "-A POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n"
                "-A POSTROUTING -j MARK --set-xmark 0x4000/0x0\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n")
        result = Tracer(parse(text), []).trace(Packet("10.0.0.2", "10.9.9.9", 80))
        assert result.masquerade, mark_rule


def test_conntrack_state_and_statistic_branches():
    text = ("*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n"
            "-A FORWARD -m conntrack --ctstate NEW -j DROP\nCOMMIT\n"
            "*nat\n:PREROUTING ACCEPT [0:0]\n:SVC - [0:0]\n-A PREROUTING -d 172.30.0.1 -j SVC\n"
            "-A SVC -m statistic --mode random --probability 0.33333333349 -j DNAT --to-destination 10.1.0.1:80\n"
            "-A SVC -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.1.0.2:80\n"
            "-A SVC -j DNAT --to-destination 10.1.0.3:80\nCOMMIT\n")
    rules = parse(text)
    first = Tracer(rules, []).trace(Packet("10.0.0.2", "172.30.0.1", 80))
    assert [d["target"] for d in first.dnat] == ["10.1.0.1:80", "10.1.0.2:80", "10.1.0.3:80"]
    assert all(abs(d["probability"] - 1 / 3) < 1e-6 for d in first.dnat)
    assert first.verdict == "DROP"                     # a first packet is NEW
    later = Tracer(rules, []).trace(Packet("10.0.0.2", "172.30.0.1", 80, ctstate="ESTABLISHED"))
    assert later.verdict == "ACCEPT"


def _chains_and_rules(ruleset):
    return {(t, c): [r.text for r in ruleset.chain(t, c).rules] for t in ("filter", "nat") for c in ruleset.chain_names(t)}


def test_lazy_parsing_reads_the_same_ruleset():
    """parse(lazy=True) finds each chain's rules in the text when first used: kube-proxy's restore
    text and iptables-save output read exactly as a full parse reads them, deleted chains included."""
    case = _case01()
    text = render(load_objects(case["objects"]), proxier_config(case["proxier_config"]),
                  existing_nat_chains=["KUBE-SEP-STALEAAAAAAAAAAA"])
    assert "-X KUBE-SEP-STALEAAAAAAAAAAA" in text
    for form in (text, case["expected"]["observed_iptables_save"]):
        lazy, eager = parse(form, lazy=True), parse(form)
        assert lazy.chain("nat", "KUBE-SEP-STALEAAAAAAAAAAA") is None
        assert _chains_and_rules(lazy) == _chains_and_rules(eager)
    # the laziness itself: an untouched chain has parsed nothing
    lazy = parse(text, lazy=True)
    services = lazy.chain("nat", "KUBE-SERVICES")
    assert services._source is not None and services._list == []
    services.rule(0)
    assert services._source is None and sum(1 for item in services._list if not isinstance(item, tuple)) == 1
    # files with inserts or flushes are parsed in full, in order
    inserted = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j DROP\n-I INPUT 1 -s 10.0.0.1 -j ACCEPT\nCOMMIT\n"
    assert [r.target for r in parse(inserted, lazy=True).chain("filter", "INPUT").rules] == ["ACCEPT", "DROP"]
    # a malformed rule of a lazily read file is reported when the packet reaches it
    from labkit.errors import LabkitError
    broken = parse("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -s 10.0.0.300 -j DROP\nCOMMIT\n", lazy=True)
    with pytest.raises(LabkitError, match="bad address"):
        Tracer(broken, ["10.0.0.9/24"]).trace(Packet("10.0.0.2", "10.0.0.9", 80))


def test_a_later_packet_skips_the_nat_table_and_uses_its_conntrack_entry():
    """The kernel runs the nat chains for a connection's first packet only: a later one is not
    load-balanced again; conntrack applies the first packet's DNAT and masquerade."""
    from labkit.netfilter import Conntrack
    text = ("*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:SVC - [0:0]\n-A PREROUTING -d 172.30.0.1 -j SVC\n"
            "-A SVC -m statistic --mode random --probability 0.5 -j DNAT --to-destination 10.1.0.1:80\n"
            "-A SVC -j DNAT --to-destination 10.1.0.2:80\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n"
            "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\nCOMMIT\n")
    rules = parse(text)
    first = Tracer(rules, []).trace(Packet("10.0.0.2", "172.30.0.1", 80))
    assert len(first.branches) == 2 and first.verdict == "DROP"            # NEW: FORWARD's policy
    later = Tracer(rules, [], conntrack=Conntrack(dnat="10.1.0.2:80", masquerade=True)).trace(
        Packet("10.0.0.2", "172.30.0.1", 80, ctstate="ESTABLISHED"))
    assert [b.dnat for b in later.branches] == ["10.1.0.2:80"] and later.masquerade and later.verdict == "ACCEPT"
    assert not any("statistic" in s.text for s in later.branches[0].steps)
    assert later.output == "" and "summary: DNAT to 10.1.0.2:80, accepted, masqueraded" in later.tree()
    unknown = Tracer(rules, []).trace(Packet("10.0.0.2", "172.30.0.1", 80, ctstate="ESTABLISHED"))
    assert [b.dnat for b in unknown.branches] == [None] and any("no conntrack entry" in n for n in unknown.notes)


def test_the_summary_agrees_with_the_branches():
    """A pod reaching its own Service: only the branch back to itself is masqueraded; the last line
    says so (kube-proxy's test tracer, which says masq=True for the whole packet, is JSON only)."""
    text = ("*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:SVC - [0:0]\n:SEP1 - [0:0]\n:SEP2 - [0:0]\n"
            ":KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n"
            "-A PREROUTING -d 172.30.0.1 -j SVC\n-A POSTROUTING -j KUBE-POSTROUTING\n"
            "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n-A KUBE-POSTROUTING -j MASQUERADE\n"
            "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n"
            "-A SVC -m statistic --mode random --probability 0.5 -j SEP1\n-A SVC -j SEP2\n"
            "-A SEP1 -s 10.1.0.1 -j KUBE-MARK-MASQ\n-A SEP1 -p tcp -j DNAT --to-destination 10.1.0.1:80\n"
            "-A SEP2 -s 10.1.0.2 -j KUBE-MARK-MASQ\n-A SEP2 -p tcp -j DNAT --to-destination 10.1.0.2:80\nCOMMIT\n")
    result = Tracer(parse(text), []).trace(Packet("10.1.0.1", "172.30.0.1", 80))
    last = result.tree().splitlines()[-1]
    assert last == ("summary (2 branches): p=0.5: DNAT to 10.1.0.1:80, passes, masqueraded; "
                    "p=0.5: DNAT to 10.1.0.2:80, passes, not masqueraded")
    assert "masq=" not in result.tree()
    assert result.to_dict()["kube_proxy_test_tracer"]["masq"] is True


def test_parse_errors_name_the_line():
    from labkit.errors import LabkitError
    with pytest.raises(LabkitError, match="line 2"):
        parse("*filter\n-A INPUT -s 10.0.0.300 -j DROP\nCOMMIT\n")


def _case01():
    paths = [p for p in case_files() if p.name.startswith("01-")]
    if not paths:
        pytest.skip("shared fidelity case 01 is not on this machine")
    return load_case(paths[0])


def test_render_cli(tmp_path):
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump_all(_case01()["objects"]))
    out = labkit("kube-proxy", "render", "-f", str(objects), "--hostname", "test-node", "--node-ip", "192.168.0.2",
                 "--no-random-fully", "--sorted", check=0).stdout
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000" in out
    assert '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE\n' in out
    config = tmp_path / "kp.yaml"
    config.write_text("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
                      "clusterCIDR: 10.0.0.0/8\niptables: {localhostNodePorts: false}\n")
    out2 = labkit("kube-proxy", "render", "-f", str(objects), "--config", str(config), "--hostname", "test-node",
                  "--node-ip", "192.168.0.2", "--nfacct-counter", "none", check=0).stdout
    assert "KUBE-FIREWALL" not in out2 and "nfacct" not in out2 and "--random-fully" in out2
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 80, protocol: ICMP}]}\n")
    err = labkit("kube-proxy", "render", "-f", str(bad), check=2).stderr
    assert err.strip() == f"labkit: {bad}: Service default/x: spec.ports[0].protocol: expected TCP, UDP or SCTP, got 'ICMP'"


def test_trace_cli_on_a_saved_ruleset(tmp_path):
    case = _case01()
    text = render(load_objects(case["objects"]), proxier_config(case["proxier_config"]))
    rules = tmp_path / "rules.txt"
    rules.write_text(text)
    locals_ = []
    for ip in case["proxier_config"]["tracerLocalIPs"]:
        locals_ += ["--local-address", ip]
    result = json.loads(labkit("trace", "--rules", str(rules), "--src", "10.0.0.2", "--dst", "172.30.0.44:80",
                               "-o", "json", *locals_, check=0).stdout)
    assert result["dnat"] == [{"target": "10.180.0.4:80", "probability": 0.5}, {"target": "10.180.0.5:80", "probability": 0.5}]
    assert result["output"] == "10.180.0.4:80, 10.180.0.5:80" and result["masquerade"] is False
    assert any("jump rules" in n for n in result["notes"])
    tree = labkit("trace", "--rules", str(rules), "--src", "203.0.113.2", "--dst", "192.168.99.22:80", *locals_, check=0).stdout
    assert "verdict DROP" in tree and "has no local endpoints" in tree
    assert labkit("trace", "--rules", str(rules), "--src", "10.0.0.2", "--dst", "172.30.0.44", check=2).stderr.startswith("labkit: --dst")


def test_trace_cli_on_a_running_labs_node():
    """--node resolves a host of a running lab (hosts(env)) and reads its live rules (iptables-legacy-save in the node)."""
    case = _case01()
    labkit("run", "demo", check=0)
    try:
        from types import SimpleNamespace
        from labkit.state import LabEnv, LabState
        netns = LabEnv(SimpleNamespace(id="demo"), LabState("demo")).netns_name("a")
        sync_node(netns, load_objects(case["objects"]), proxier_config(case["proxier_config"]))
        result = json.loads(labkit("trace", "--lab", "demo", "--node", "a", "--src", "203.0.113.2",
                                   "--dst", "5.6.7.8:80", "-o", "json", check=0).stdout)
        assert result["dnat"] == [{"target": "10.180.0.3:80", "probability": 1.0}]
        assert result["masquerade"] is True and result["verdict"] == "ACCEPT"
        assert result["affinity"] and result["affinity"][0]["dnat"] == ["10.180.0.3:80"]
        missing = labkit("trace", "--lab", "demo", "--node", "zz", "--src", "1.2.3.4", "--dst", "5.6.7.8:80", check=2)
        assert "no node 'zz'" in missing.stderr
    finally:
        labkit("cleanup", "demo", check=0)


def test_nfacct_counters_live_in_the_namespace():
    """The counters are made inside the lab namespace: loading a rule that uses one works there."""
    with lab_namespace() as netns:
        rule = "*filter\n:T - [0:0]\n-A T -m nfacct --nfacct-name labkit_probe -j ACCEPT\nCOMMIT\n"
        ok, message = load.try_restore(netns, rule)
        assert not ok and "failed" in message
        assert load.ensure_nfacct(netns, ["labkit_probe"]) == {"labkit_probe": None}
        assert load.ensure_nfacct(netns, ["labkit_probe"]) == {"labkit_probe": None}   # already there
        load.restore(netns, rule)
        assert "-A T -m nfacct --nfacct-name  labkit_probe -j ACCEPT" in load.save(netns, "filter")


def test_rules_built_once_are_shared_and_a_ruleset_changed_leaves_another_parse_alone():
    text = "*nat\n:KUBE-SERVICES - [0:0]\n" + RESTORE_FORM.replace("KUBE-SVC-X", "KUBE-SERVICES") + "\nCOMMIT\n"
    one, two = parse(text), parse(text)
    [a], [b] = one.table("nat").chain("KUBE-SERVICES").rules, two.table("nat").chain("KUBE-SERVICES").rules
    assert a is b                       # built once: a Rule is never changed once built
    one.ensure_rule_first("nat", "KUBE-SERVICES", ["-j", "KUBE-MARK-MASQ"])
    assert len(one.table("nat").chain("KUBE-SERVICES").rules) == 2
    assert two.table("nat").chain("KUBE-SERVICES").rules == [b] and _shape(b) == _shape(parse_rule(SAVE_FORM))
    for _ in range(2):                  # a line that does not build is refused every time
        with pytest.raises(Exception, match="needs a target"):
            parse_rule("-A KUBE-SERVICES -j")
