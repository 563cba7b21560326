"""The kube-proxy lab's judging, resets and tools: checks judged against labkit's reconstruction
(the lab as built, kube-proxy's rules for the Services), one-exercise resets that keep the
student's work, strict field validation in `labkit kube-proxy apply`, and a graph whose numbers
the follow-the-chain check accepts."""

import json
import re
import shlex

import pytest
import yaml

from kube_proxy_support import kube_proxy_lab, use
from support import labkit

from labkit.kubeproxy import judge, live
from labkit.netfilter import save


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with kube_proxy_lab(tmp_path_factory.mktemp("kube-proxy-judging")) as env:
        yield env


def result(lab, exercise):
    out = labkit("check", "kube-proxy", exercise, "-o", "json", env=lab)
    return json.loads(out.stdout)["results"][0]


def test_apply_refuses_unknown_and_duplicate_fields_in_kubectls_words(lab, tmp_path):
    api = yaml.safe_load(labkit("kube-proxy", "get", "services", "api", "-o", "yaml", env=lab, check=0).stdout)
    api["spec"]["sessionAfinity"] = "ClientIP"
    path = tmp_path / "api.yaml"
    path.write_text(yaml.safe_dump(api))
    refused = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=2)
    assert (f'Error from server (BadRequest): error when replacing "{path}": Service in version "v1" cannot be '
            'handled as a Service: strict decoding error: unknown field "spec.sessionAfinity"') in refused.stderr
    after = yaml.safe_load(labkit("kube-proxy", "get", "services", "api", "-o", "yaml", env=lab, check=0).stdout)
    assert "sessionAfinity" not in after["spec"] and after["spec"]["sessionAffinity"] == "None"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata:\n  name: extra\n  name: extra2\n"
                    "spec:\n  ports: [{port: 80}]\n")
    refused = labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=2)
    assert f'error when creating "{path}"' in refused.stderr and 'duplicate field "metadata.name"' in refused.stderr


def test_the_graphs_probabilities_are_an_answer_the_check_accepts(lab):
    out = labkit("kube-proxy", "graph", "--node", "node1", "--service", "web", env=lab, check=0).stdout
    svc = re.search(r"(KUBE-SVC-[A-Z0-9]{16})", out).group(1)
    printed = [float(p) for p in re.findall(r"probability (\S+)", out)]
    assert len(printed) == 3 and printed[1] != round(printed[1], 4)       # every digit, not 0.3333
    from pathlib import Path
    target = Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "follow-the-chain.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump({"chain": svc, "probabilities": printed + [1]}))
    assert result(lab, "follow-the-chain")["status"] == "pass"
    # the same as fractions, as the chain's design is told (1/n, then 1/(n-1), ...)
    n = len(printed) + 1
    target.write_text(yaml.safe_dump({"chain": svc, "probabilities": [f"1/{n - i}" for i in range(n - 1)] + ["1"]}))
    assert result(lab, "follow-the-chain")["status"] == "pass"
    target.write_text(yaml.safe_dump({"chain": svc, "probabilities": ["1/0"] * n}))
    refused = result(lab, "follow-the-chain")
    assert refused["status"] != "pass" and "probabilities must be numbers (0.3333 or 1/3)" in refused["message"], refused


def test_traffic_policy_grades_the_prediction_written_before_labkit_showed_the_outcome(lab):
    from pathlib import Path
    answer = Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "traffic-policy.yaml"
    kept = Path(lab["LABKIT_STATE_DIR"]) / "kube-proxy" / "predictions" / "traffic-policy.yaml"   # labkit.predictions
    answer.unlink(missing_ok=True)
    labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)
    assert not kept.exists()            # the lab as built: nothing observed yet
    # before a prediction is written, labkit withholds the outcome and keeps nothing
    seen = labkit("kube-proxy", "curl", "--from", "client", "--to", "192.168.50.12:30101", "-n", "1",
                  "--timeout", "0.3", env=lab, check=None)
    assert seen.returncode != 0 and "there is no prediction" in seen.stderr and not kept.exists()
    traced = labkit("trace", "--node", "node2", "--src", "192.168.50.100", "--dst", "192.168.50.12:30101", env=lab,
                    check=None)
    assert traced.returncode != 0 and "there is no prediction" in traced.stderr and not kept.exists()
    # ... whoever sends: another outside address, the other node, a pod (shop-cluster masquerades it too)
    for argv in (("trace", "--node", "node2", "--src", "1.2.3.4", "--dst", "192.168.50.12:30101"),
                 ("kube-proxy", "curl", "--from", "node1", "--to", "192.168.50.12:30101", "-n", "1", "--timeout", "0.3"),
                 ("kube-proxy", "curl", "--from", "web-3", "--to", "192.168.50.12:30100", "-n", "1", "--timeout", "0.3")):
        shown = labkit(*argv, env=lab, check=None)
        assert shown.returncode != 0 and "there is no prediction" in shown.stderr and not kept.exists(), argv
    # ... and a saved copy of node2's rules traced instead of the node, whatever address it is traced at
    copy = Path(lab["LABKIT_ANSWERS_DIR"]) / "node2-copy.rules"
    copy.write_text(labkit("shell", "kube-proxy", "node2", "--", "iptables-save", env=lab, check=0).stdout)
    for dst in ("192.168.50.12:30101", "10.0.0.9:30101"):
        shown = labkit("trace", "--rules", str(copy), "--src", "192.168.50.100", "--dst", dst, "--local-address",
                       dst.split(":")[0], env=lab, check=None)
        assert shown.returncode != 0 and "there is no prediction" in shown.stderr and not kept.exists(), dst
    assert "DNAT" in labkit("trace", "--rules", str(copy), "--src", "10.244.1.2", "--dst", "10.96.0.10:80",
                            env=lab, check=0).stdout            # other Services' rules are traced as before
    # a wrong prediction, then a trace shows the outcome, then the right one: the wrong one is graded
    labkit("solve", "kube-proxy", "traffic-policy", env=lab, check=0)
    right = answer.read_text()
    # one the check could not grade is not kept: said while it can be fixed, the outcome still withheld
    malformed = yaml.safe_load(right)
    malformed["shop-local"]["node1"] = {"answers": True, "client_ip_preserved": "no"}
    answer.write_text(yaml.safe_dump(malformed))
    traced = labkit("trace", "--node", "node2", "--src", "192.168.50.100", "--dst", "192.168.50.12:30101", env=lab,
                    check=None)
    assert traced.returncode != 0 and "shop-local.node1 predicts an answer" in traced.stderr and not kept.exists()
    wrong = yaml.safe_load(right)
    wrong["shop-local"]["node2"] = {"answers": True, "client_ip_preserved": True}
    answer.write_text(yaml.safe_dump(wrong))
    traced = labkit("trace", "--node", "node2", "--src", "192.168.50.100", "--dst", "192.168.50.12:30101", env=lab,
                    check=0)
    assert "keeps your traffic-policy prediction" in traced.stderr
    answer.write_text(right)
    graded = result(lab, "traffic-policy")
    assert graded["status"] == "fail" and "changes after observing do not count" in graded["message"]
    # a reset keeps what was predicted before observing: the right answer written after still fails
    labkit("reset", "kube-proxy", "traffic-policy", "--yes", env=lab, check=0)
    graded = result(lab, "traffic-policy")
    assert graded["status"] == "fail" and "changes after observing do not count" in graded["message"]
    # predicted right before observing (forgotten explicitly): passes, and observing again changes nothing
    labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)
    assert not kept.exists()
    labkit("kube-proxy", "curl", "--from", "client", "--to", "192.168.50.11:30101", "-n", "1", env=lab, check=0)
    labkit("kube-proxy", "curl", "--from", "client", "--to", "192.168.50.11:30101", "-n", "1", env=lab, check=0)
    assert result(lab, "traffic-policy")["status"] == "pass"


def test_traffic_policy_counts_a_request_sent_by_hand_before_the_prediction(lab):
    # a shell cannot withhold anything: real curl in the client's namespace to node2's NodePort of
    # shop-local (dropped there: no answer, yet the node's connection log has it), before a prediction
    from pathlib import Path
    answer = Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "traffic-policy.yaml"
    answer.unlink(missing_ok=True)
    labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)
    try:
        sent = labkit("shell", "kube-proxy", "client", "--", "curl", "-s", "-m", "0.5", "192.168.50.12:30101",
                      env=lab, check=None)
        assert sent.returncode == 28            # curl: timed out
        labkit("solve", "kube-proxy", "traffic-policy", env=lab, check=0)       # the right prediction, written after
        shown = labkit("kube-proxy", "curl", "--from", "client", "--to", "192.168.50.11:30101", "-n", "1", env=lab, check=0)
        assert ("you sent a request to these NodePorts yourself before this prediction was written (client "
                "(192.168.50.100) to node2's 192.168.50.12:30101 (shop-local)") in shown.stderr, shown.stderr
        graded = result(lab, "traffic-policy")
        assert graded["status"] == "fail" and ("you sent a request from client (192.168.50.100) to node2's NodePort "
                                               "30101 (shop-local) yourself") in graded["message"], graded
        # a reset of the exercise keeps the request (only --forget-prediction forgets it)
        labkit("reset", "kube-proxy", "traffic-policy", "--yes", env=lab, check=0)
        graded = result(lab, "traffic-policy")
        assert graded["status"] == "fail" and "a reset since then does not undo" in graded["message"], graded
        labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)
        labkit("solve", "kube-proxy", "traffic-policy", env=lab, check=0)
        # observed by hand after predicting (a pod's wget to shop-cluster, answered): the prediction is judged
        seen = labkit("shell", "kube-proxy", "web-3", "--", "wget", "-q", "-O-", "-T", "2", "192.168.50.12:30100",
                      env=lab, check=0)
        assert '"pod": "shop-' in seen.stdout
        assert result(lab, "traffic-policy")["status"] == "pass"
    finally:
        labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)


def test_traffic_policy_is_graded_against_the_lab_as_built(lab, tmp_path):
    labkit("solve", "kube-proxy", "traffic-policy", env=lab, check=0)
    shop = yaml.safe_load(labkit("kube-proxy", "get", "services", "shop-local", "-o", "yaml", env=lab, check=0).stdout)
    shop["spec"]["externalTrafficPolicy"] = "Cluster"
    path = tmp_path / "shop.yaml"
    path.write_text(yaml.safe_dump(shop))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    graded = result(lab, "traffic-policy")
    assert graded["status"] == "pass" and "you changed Service shop-local (spec.externalTrafficPolicy)" in graded["message"]
    at_risk = labkit("reset", "kube-proxy", "traffic-policy", env=lab, check=None)
    assert "Service shop-local as you changed it" in at_risk.stdout + at_risk.stderr
    labkit("reset", "kube-proxy", "traffic-policy", "--yes", env=lab, check=0)
    restored = yaml.safe_load(labkit("kube-proxy", "get", "services", "shop-local", "-o", "yaml", env=lab, check=0).stdout)
    assert restored["spec"]["externalTrafficPolicy"] == "Local"
    assert "you changed" not in result(lab, "traffic-policy")["message"]


def test_a_one_exercise_reset_keeps_the_other_exercises_work_and_the_students_rules(lab, monkeypatch):
    env = use(monkeypatch, lab)
    for exercise in ("session-affinity", "nodeport", "clusterip-by-hand"):
        labkit("solve", "kube-proxy", exercise, env=lab, check=0)
    from labkit import runner
    # what `labkit solve` left is not the student's work; what the student changes after is
    assert runner.work_at_risk(env.lab, "nodeport") == [] and runner.work_at_risk(env.lab, "clusterip-by-hand") == []
    web = live.load(env).service("web")
    web["metadata"]["labels"] = {"team": "mine"}
    live.apply_documents(env, [web], "test")
    assert any("Service web as you changed it (changed: spec.externalTrafficPolicy, spec.ports, spec.type, "
               "metadata.labels)" in w for w in runner.work_at_risk(env.lab, "nodeport"))
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-I", "KUBE-SERVICES", "1", "-d",
           "10.96.0.30/32", "-p", "udp", "--dport", "80", "-j", "KUBE-MARK-MASQ", env=lab, check=0)
    hand = runner.work_at_risk(env.lab, "clusterip-by-hand")
    # (the solution's rules with it: the exercise's part is no longer as `labkit solve` left it)
    assert any("changes to node1's rules, in" in w and "nat KUBE-SERVICES" in w for w in hand), hand
    asked = labkit("reset", "kube-proxy", "clusterip-by-hand", env=lab, check=2)
    assert "changes to node1's rules" in asked.stderr and "--yes" in asked.stderr
    # a rule kube-proxy does not write for legacy fails the exercise, named
    graded = result(lab, "clusterip-by-hand")
    assert graded["status"] == "fail" and "-p udp" in graded["message"] and "kube-proxy does not write" in graded["message"]
    labkit("reset", "kube-proxy", "nodeport", "--yes", env=lab, check=0)
    state = live.load(env)
    assert state.service("web")["spec"]["type"] == "ClusterIP"
    assert state.service("api")["spec"]["sessionAffinity"] == "ClientIP"         # session-affinity's work stays
    assert "-p udp" in result(lab, "clusterip-by-hand")["message"]                # and clusterip-by-hand's
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-D", "KUBE-SERVICES", "-d",
           "10.96.0.30/32", "-p", "udp", "--dport", "80", "-j", "KUBE-MARK-MASQ", env=lab, check=0)
    # debug-ruleset's reset rebuilds node2's rules as kube-proxy would, and breaks them again; the
    # hand-built legacy rules on node2 stay
    labkit("reset", "kube-proxy", "debug-ruleset", "--yes", env=lab, check=0)
    assert result(lab, "clusterip-by-hand")["status"] == "pass"
    assert result(lab, "debug-ruleset")["status"] == "fail"
    # clusterip-by-hand's reset removes the hand-built rules, keeping a copy of each node's rules
    # (the student's work: what `labkit solve` left, and one rule more)
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-I", "KUBE-SERVICES", "1", "-d",
           "10.96.0.30/32", "-p", "udp", "--dport", "80", "-j", "KUBE-MARK-MASQ", env=lab, check=0)
    saved = judge_saved(lab)
    labkit("reset", "kube-proxy", "clusterip-by-hand", "--yes", env=lab, check=0)
    copies = set(judge_saved(lab)) - set(saved)
    assert {p.name.rsplit("-", 2)[0] for p in copies} == {"clusterip-by-hand-node1", "clusterip-by-hand-node2"}, copies
    assert all("KUBE-SVC-NL6WUNHPOWUYGHR7" in p.read_text() for p in copies)
    assert "KUBE-SVC-NL6WUNHPOWUYGHR7" not in save(env.netns_name("node1"), "nat")
    assert result(lab, "clusterip-by-hand")["status"] == "fail"
    assert live.load(env).service("api")["spec"]["sessionAffinity"] == "ClientIP"


def judge_saved(lab):
    from pathlib import Path
    return sorted((Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "saved").glob("*.rules"))


def test_the_packet_space_sees_a_changed_port_and_not_a_dropped_comment(lab, monkeypatch):
    env = use(monkeypatch, lab)
    state = live.load(env)
    node = "node1"
    built = judge.built_rules(env, node)
    reference = judge.reference_rules(built, state.objects(), live.proxier_config(state, node))
    space = judge.probes(state, node, [state.service("catalog")])
    local = live.proxier_config(state, node).local_addresses
    assert judge.compare(node, reference, reference, local, space) == []
    no_comments = re.sub(r' -m comment --comment ("[^"]*"|\S+)', "", reference)
    assert judge.compare(node, no_comments, reference, local, space) == []
    moved = reference.replace("--to-destination 10.244.2.3:8080", "--to-destination 10.244.2.3:8081")
    [found] = judge.compare(node, moved, reference, local, space)
    assert found.probe.dst == "10.96.0.11" and "10.244.2.3:8081" in found.sentence()


def nat_of(env, node):
    """A node's nat table without the built-in chains' packet counters (traffic changes them)."""
    return re.sub(r"\[\d+:\d+\]", "[counters]", save(env.netns_name(node), "nat"))


def test_debug_ruleset_bypass_fails_and_its_reset_lists_saves_and_removes_it_once(lab, monkeypatch):
    env = use(monkeypatch, lab)
    from labkit import runner
    labkit("reset", "kube-proxy", "debug-ruleset", "--yes", env=lab, check=0)
    broken = nat_of(env, "node2")
    # the broken chains left as they are, correct copies jumped to first from PREROUTING and OUTPUT
    labkit("solve", "kube-proxy", "debug-ruleset", "--mistake", "bypass_in_front_of_the_broken_chains", env=lab, check=0)
    graded = result(lab, "debug-ruleset")
    assert graded["status"] == "fail" and "MY-CATALOG" in graded["message"]
    at_risk = runner.work_at_risk(env.lab, "debug-ruleset")
    assert any("node2's rules" in w and "nat MY-CATALOG" in w and "nat PREROUTING" in w for w in at_risk), at_risk
    # and a chain of the student's own, which no rule jumps to
    for args in (("-N", "MY-WORK"), ("-A", "MY-WORK", "-j", "RETURN")):
        labkit("shell", "kube-proxy", "node2", "--", "iptables", "-t", "nat", *args, env=lab, check=0)
    at_risk = runner.work_at_risk(env.lab, "debug-ruleset")
    assert any("nat MY-CATALOG" in w and "nat MY-WORK" in w for w in at_risk), at_risk
    assert any("nat MY-WORK" in w for w in runner.work_at_risk(env.lab, None))
    assert not any("MY-" in w for w in runner.work_at_risk(env.lab, "clusterip-by-hand"))   # none of it is legacy's
    saved = set(judge_saved(lab))
    labkit("reset", "kube-proxy", "debug-ruleset", "--yes", env=lab, check=0)
    (copy,) = set(judge_saved(lab)) - saved
    assert copy.name.startswith("debug-ruleset-node2-") and copy.read_text().count("-j MY-CATALOG\n") == 2
    after = nat_of(env, "node2")
    assert "MY-CATALOG" not in after and "MY-WORK" not in after and after == broken     # as the lab broke it
    labkit("reset", "kube-proxy", "debug-ruleset", "--yes", env=lab, check=0)
    assert nat_of(env, "node2") == broken and runner.work_at_risk(env.lab, "debug-ruleset") == []


def test_follow_the_chain_is_graded_against_kube_proxys_rules_and_its_reset_restores_them(lab, monkeypatch):
    env = use(monkeypatch, lab)
    from pathlib import Path
    from labkit import runner
    from labkit.kubeproxy.chains import service_chain, service_port_name
    labkit("reset", "kube-proxy", "follow-the-chain", "--yes", env=lab, check=0)
    chain = service_chain(service_port_name("default", "web", "http"), "tcp")
    before = nat_of(env, "node1")
    second = [line for line in before.splitlines() if line.startswith(f"-A {chain} ")
              and "KUBE-SEP-" in line][1]
    tampered = shlex.split(re.sub(r"--probability \S+", "--probability 0.1", second))[2:]
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-R", chain, "2", *tampered, env=lab, check=0)
    answer = Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "follow-the-chain.yaml"
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text(yaml.safe_dump({"chain": chain, "probabilities": [0.1, 0.33333333349, 0.5, 1]}))
    graded = result(lab, "follow-the-chain")
    assert graded["status"] == "fail" and "is not what kube-proxy wrote" in graded["message"]
    answer.write_text(yaml.safe_dump({"chain": chain, "probabilities": [0.25, 0.33333333349, 0.5, 1]}))
    graded = result(lab, "follow-the-chain")
    assert graded["status"] == "pass" and "is not what kube-proxy wrote" in graded["message"]
    # a key given twice is refused, not silently the last one
    answer.write_text(f"chain: {chain}\nprobabilities: [0.1, 0.2, 0.5, 1]\nprobabilities: [0.25, 0.33333333349, 0.5, 1]\n")
    graded = result(lab, "follow-the-chain")
    assert graded["status"] != "pass" and "gives probabilities twice" in graded["message"]
    # every reset lists the edit, and follow-the-chain's puts node1's rules back
    assert any("node1's rules, in nat " + chain in w for w in runner.work_at_risk(env.lab, None))
    assert any("node1's rules, in nat " + chain in w for w in runner.work_at_risk(env.lab, "follow-the-chain"))
    assert runner.work_at_risk(env.lab, "debug-ruleset") == []
    saved = set(judge_saved(lab))
    labkit("reset", "kube-proxy", "follow-the-chain", "--yes", env=lab, check=0)
    (copy,) = set(judge_saved(lab)) - saved
    assert "--probability 0.10000000009" in copy.read_text()
    assert nat_of(env, "node1") == before


@pytest.mark.parametrize("ready", [True, False])
def test_nodeport_names_an_endpointslice_of_ones_own_not_another_service(lab, tmp_path, ready):
    # an EndpointSlice of one's own for web listing shop-1 (a pod shop-cluster opens on its own node
    # port): what changed is web's endpoints, not shop-cluster, which the feedback once blamed
    # (and told to delete)
    labkit("solve", "kube-proxy", "nodeport", env=lab, check=0)
    assert result(lab, "nodeport")["status"] == "pass"
    extra = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": "web-extra", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
             "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
             "endpoints": [{"addresses": ["10.244.1.5"], "conditions": {"ready": ready}, "nodeName": "node1"}]}
    path = tmp_path / "extra.yaml"
    path.write_text(yaml.safe_dump(extra))
    labkit("kube-proxy", "apply", "-f", str(path), env=lab, check=0)
    try:
        graded = result(lab, "nodeport")
        assert graded["status"] == "fail", graded
        assert "EndpointSlice web-extra lists 10.244.1.5:8080" in graded["message"], graded["message"]
        assert "shop-cluster" not in graded["message"], graded["message"]
    finally:
        labkit("kube-proxy", "delete", "endpointslice/web-extra", env=lab, check=0)
    assert result(lab, "nodeport")["status"] == "pass"


def test_hairpin_a_malformed_address_is_not_a_wrong_answer_and_a_hand_edit_is_noted(lab, monkeypatch):
    from pathlib import Path
    answer = Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "hairpin.yaml"
    tries = Path(lab["LABKIT_STATE_DIR"]) / "kube-proxy" / "tries.json"

    def counted():
        return len(json.loads(tries.read_text()).get("hairpin") or []) if tries.exists() else 0
    labkit("solve", "kube-proxy", "hairpin", env=lab, check=0)
    right = yaml.safe_load(answer.read_text())
    before = counted()
    answer.write_text(yaml.safe_dump({**right, "seen_by_others": right["seen_by_others"] + "/32"}))
    graded = result(lab, "hairpin")
    assert graded["status"] == "fail" and "malformed" in graded["message"], graded
    assert counted() == before              # a form error is not a wrong answer (labkit.exercises.run_check)
    # node1's hairpin mark deleted by hand: the pod's own answers time out; the check grades the lab as
    # built and says the live rules were changed, without naming the chain (one of the answers)
    answer.write_text(yaml.safe_dump(right))
    nat = save(use(monkeypatch, lab).netns_name("node1"), "nat")
    mark = next(line for line in nat.splitlines() if line.startswith(f"-A {right['chain']} ") and "KUBE-MARK-MASQ" in line)
    labkit("shell", "kube-proxy", "node1", "--", "iptables", "-t", "nat", "-D", *shlex.split(mark)[1:], env=lab, check=0)
    try:
        answer.write_text(yaml.safe_dump({**right, "seen_by_itself": right["seen_by_others"]}))
        graded = result(lab, "hairpin")
        assert graded["status"] == "fail" and "are not what kube-proxy writes (they were changed by hand)" in \
            graded["message"], graded
        assert right["chain"] not in graded["message"]
    finally:
        labkit("reset", "kube-proxy", "follow-the-chain", "--yes", env=lab, check=0)
    answer.write_text(yaml.safe_dump(right))
    graded = result(lab, "hairpin")
    assert graded["status"] == "pass" and "changed by hand" not in graded["message"], graded


def test_a_verdict_that_differs_on_some_branches_says_which_and_what_the_others_get():
    # a DROP written by hand in FORWARD for one endpoint: the packet is dropped on that endpoint's
    # branch only; the words once read "is dropped or let through where kube-proxy's rules let it pass"
    expected = {("10.244.1.2:8080", "passes", True, ()): 0.75, ("10.244.2.3:8080", "passes", True, ()): 0.25}
    got = {("10.244.1.2:8080", "passes", True, ()): 0.75, ("10.244.2.3:8080", "dropped", False, ()): 0.25}
    what = judge.Difference("node1", None, expected, got).what()
    assert what == ("is dropped on some of its branches (let through on the others) where kube-proxy's rules "
                    "let it pass"), what
    everywhere = {("10.244.1.2:8080", "dropped", False, ()): 0.75, ("10.244.2.3:8080", "dropped", False, ()): 0.25}
    assert judge.Difference("node1", None, expected, everywhere).what() == \
        "is dropped where kube-proxy's rules let it pass"


def test_a_check_does_not_describe_a_nodeport_outcome_traffic_policy_asks_to_predict(lab, monkeypatch):
    # node1's nat table copied onto node2 (its legacy rules written there by hand): node2 then sends
    # the client's request to shop-local's NodePort to node1's local endpoints, where kube-proxy's
    # rules drop it. The check once said so ("to 192.168.50.12:30101 is DNATed ... where kube-proxy's
    # rules leave it alone") before the traffic-policy prediction was written: the outcome that
    # exercise asks to predict, which labkit's tools withhold until then
    from pathlib import Path
    env = use(monkeypatch, lab)
    (Path(lab["LABKIT_ANSWERS_DIR"]) / "kube-proxy" / "traffic-policy.yaml").unlink(missing_ok=True)
    labkit("reset", "kube-proxy", "traffic-policy", "--forget-prediction", "--yes", env=lab, check=0)
    labkit("solve", "kube-proxy", "clusterip-by-hand", env=lab, check=0)
    copy = save(env.netns_name("node1"), "nat")
    labkit("shell", "kube-proxy", "node2", "--", "sh", "-c", f"printf '%s\\n' {shlex.quote(copy)} | iptables-restore -T nat",
           env=lab, check=0)
    try:
        graded = result(lab, "clusterip-by-hand")
        assert graded["status"] == "fail", graded
        assert "30101" not in graded["message"] and "30100" not in graded["message"], graded["message"]
        assert "does not say how before your traffic-policy prediction is kept" in graded["message"], graded["message"]
    finally:
        labkit("reset", "kube-proxy", "debug-ruleset", "--yes", env=lab, check=0)
        labkit("reset", "kube-proxy", "clusterip-by-hand", "--yes", env=lab, check=0)
