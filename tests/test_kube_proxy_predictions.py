"""Which requests and traces show what traffic-policy asks to predict (labkit.kubeproxy.situations),
in-process on the lab's scenario: every sender's packet to a node's NodePort of shop-cluster or
shop-local, not only the client's."""

from types import SimpleNamespace

import pytest

from labkit.kubeproxy.cluster_state import load_scenario
from labkit.kubeproxy.situations import shows_outcome
from labkit.labs import get_lab

NODES = ("192.168.50.11", "192.168.50.12")


@pytest.fixture(scope="module")
def lab_and_state():
    lab = get_lab("kube-proxy")
    return SimpleNamespace(lab=lab), load_scenario(lab.directory / "scenarios" / "cluster.yaml")


@pytest.mark.parametrize("src", [None, "192.168.50.100", "192.168.50.116", "1.2.3.4", "192.168.50.11",
                                 "192.168.50.12", "10.244.2.2", "10.244.1.1"])
@pytest.mark.parametrize("dst", NODES)
@pytest.mark.parametrize("port", [30100, 30101])
def test_every_sender_to_a_shop_node_port_shows_the_outcome(lab_and_state, src, dst, port):
    env, state = lab_and_state
    assert shows_outcome(env, state, src, dst, port)


@pytest.mark.parametrize("dst, port", [("192.168.50.11", 30090), ("192.168.50.12", 30080),
                                       ("10.96.0.40", 80), ("10.96.0.41", 80), ("10.244.1.5", 8080)])
def test_other_destinations_do_not(lab_and_state, dst, port):
    env, state = lab_and_state
    assert not shows_outcome(env, state, "1.2.3.4", dst, port)


def test_a_prediction_is_kept_only_when_the_check_can_grade_it():
    # the gate keeps the answer file as the graded prediction: one the check must refuse is refused now
    from labkit.kubeproxy.situations import prediction_problem

    names, nodes = ("shop-cluster", "shop-local"), ["node1", "node2"]
    whole = {"shop-cluster": {"node1": {"answers": True, "client_ip_preserved": False},
                              "node2": {"answers": True, "client_ip_preserved": False}},
             "shop-local": {"node1": {"answers": True, "client_ip_preserved": True}, "node2": {"answers": False}}}
    assert prediction_problem(whole, names, nodes) is None
    quoted = {**whole, "shop-local": {**whole["shop-local"], "node2": {"answers": True, "client_ip_preserved": "no"}}}
    assert "shop-local.node2 predicts an answer, so it needs client_ip_preserved" in prediction_problem(quoted, names, nodes)
    assert "shop-cluster.node2 must be a mapping" in prediction_problem(
        {**whole, "shop-cluster": {"node1": whole["shop-cluster"]["node1"]}}, names, nodes)
    assert "shop-cluster must be a mapping" in prediction_problem({"shop-cluster": "maybe"}, names, nodes)
    # a node's name misspelled is named as the student wrote it
    typo = {**whole, "shop-cluster": {"node-1": whole["shop-cluster"]["node1"], "node2": whole["shop-cluster"]["node2"]}}
    assert prediction_problem(typo, names, nodes) == ("shop-cluster has no entry node1; it has node-1 instead — is one "
                                                      "of them misspelled? (the nodes are node1, node2)")
    assert prediction_problem([], names, nodes)
    # a key misspelled beside the ones read, or a node that is not one: not read as left out
    spelled = {**whole, "shop-local": {**whole["shop-local"],
                                       "node2": {"answers": False, "client_ip_preserverd": False}}}
    assert prediction_problem(spelled, names, nodes) == (
        "shop-local.node2 has client_ip_preserverd, which this exercise does not read (the keys are answers, "
        "client_ip_preserved: is one misspelled?)")
    extra = {**whole, "shop-cluster": {**whole["shop-cluster"], "node3": {"answers": True}}}
    assert prediction_problem(extra, names, nodes) == "shop-cluster has node3, which is not a node (the nodes are node1, node2)"


def _traced(state, node: str, dst: str, port: int, rename=lambda text: text) -> list[str]:
    """The rules a packet from the client goes through in a saved copy of `node`'s rules (kube-proxy's
    render for the scenario, `rename`d as a student might edit the file), as `labkit trace --rules` follows it."""
    from labkit.kubeproxy import live
    from labkit.kubeproxy.proxier import render
    from labkit.netfilter import Packet, Tracer, parse

    config = live.proxier_config(state, node)
    ruleset = parse(rename(render(state.objects(), config)))
    from labkit.kubeproxy import jump_rules
    for table, chain, args in jump_rules():
        ruleset.ensure_rule_first(table, chain, args)
    result = Tracer(ruleset, ["192.0.2.1/32"]).trace(Packet("192.168.50.100", dst, port, "tcp"))
    return [s.text for b in result.branches for s in b.steps if s.kind == "rule"]


def test_a_trace_of_saved_rules_shows_the_outcome_whatever_addresses_it_uses(lab_and_state):
    # `labkit trace --rules FILE` on a copy of a node's rules: any destination on a shop NodePort,
    # and a packet that passes the shop Services' chains even on another port (the file edited)
    env, state = lab_and_state
    assert shows_outcome(env, state, None, "192.0.2.1", 30101, traced=_traced(state, "node2", "192.0.2.1", 30101))
    assert shows_outcome(env, state, None, "10.0.0.9", 30100, traced=[])
    moved = _traced(state, "node2", "192.0.2.1", 40101, rename=lambda t: t.replace("30101", "40101"))
    assert any("KUBE-EXT-" in t for t in moved)
    assert shows_outcome(env, state, None, "192.0.2.1", 40101, traced=moved)
    renamed = [t.replace("KUBE-EXT-", "MY-EXT-") for t in moved]     # chains renamed: the comments still say whose
    assert shows_outcome(env, state, None, "192.0.2.1", 40101, traced=renamed)


def test_a_trace_of_saved_rules_for_other_services_does_not(lab_and_state):
    env, state = lab_and_state
    web = state.service("web")["spec"]
    traced = _traced(state, "node1", web["clusterIP"], web["ports"][0]["port"])
    assert any("default/web:http" in t for t in traced)
    assert not shows_outcome(env, state, None, web["clusterIP"], web["ports"][0]["port"], traced=traced)
    assert not shows_outcome(env, state, None, "192.0.2.1", 30080, traced=_traced(state, "node1", "192.0.2.1", 30080))


def test_an_external_ip_of_the_situation_shows_the_outcome_as_its_node_port_does(lab_and_state):
    # externalTrafficPolicy: Local with externalIPs on the nodes' addresses (no NodePort) and endpoints
    # on node1 only: kube-proxy sends the client's packet to node2's address on the Service's port
    # through the same KUBE-EXT chain as a NodePort's, dropped for want of a local endpoint
    env, _ = lab_and_state
    lab = env.lab
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    state.apply([
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mine", "namespace": "default"},
         "spec": {"type": "ClusterIP", "externalTrafficPolicy": "Local", "externalIPs": list(NODES),
                  "ports": [{"name": "http", "port": 8081, "targetPort": 8080}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "mine-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "mine"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [{"addresses": ["10.244.1.2"], "conditions": {"ready": True}, "nodeName": "node1"}]},
    ], "test")
    for dst in NODES:
        assert shows_outcome(env, state, "192.168.50.100", dst, 8081)
        assert shows_outcome(env, state, None, dst, 8081, traced=[])
    assert not shows_outcome(env, state, "192.168.50.100", NODES[1], 8082)


# -- requests sent by hand (a shell's curl): judged from the nodes' connection logs, in-process -----

RIGHT = {"shop-cluster": {"node1": {"answers": True, "client_ip_preserved": False},
                          "node2": {"answers": True, "client_ip_preserved": False}},
         "shop-local": {"node1": {"answers": True, "client_ip_preserved": True}, "node2": {"answers": False}}}
TRUTH = {name: {node: dict(cell) for node, cell in nodes.items()} for name, nodes in RIGHT.items()}
TRY = {"at": 1000.0, "time": "12:00:00", "src": "192.168.50.100", "who": "client", "node": "node2",
       "dst": "192.168.50.12", "dport": 30101, "service": "shop-local",
       "what": "192.168.50.100 to node2's 192.168.50.12:30101 (shop-local)"}


@pytest.fixture
def judging():
    from labkit.exercises import CheckContext
    from labkit.state import LabEnv, LabState
    lab = get_lab("kube-proxy")
    state = LabState(lab.id)
    state.ensure_dir()
    return lab._load("checks.py"), CheckContext(LabEnv(lab, state), lab.exercise("traffic-policy"))


def observation(answer=RIGHT, tried=None, written_at=None, kept_at=None, kept_written_at=None):
    return {"services": ["shop-cluster", "shop-local"], "truth": TRUTH, "answer": answer, "tried": tried,
            "written_at": written_at, "kept_at": kept_at, "kept_by": None, "kept_written_at": kept_written_at,
            "situation": "", "graded_note": "", "where": "traffic-policy.yaml"}


def test_a_prediction_written_before_any_request_by_hand_is_judged(judging):
    checks, ctx = judging
    assert checks.judge_traffic_policy(ctx, observation()).passed
    # written before the request (and unchanged since): judged, right or wrong
    assert checks.judge_traffic_policy(ctx, observation(tried=TRY, written_at=999.0)).passed
    wrong = {**RIGHT, "shop-local": {**RIGHT["shop-local"], "node2": {"answers": True, "client_ip_preserved": True}}}
    failed = checks.judge_traffic_policy(ctx, observation(answer=wrong, tried=TRY, written_at=999.0))
    assert not failed.passed and "not right" in failed.message and "yourself" not in failed.message
    # kept by labkit's curl before the request: that copy is judged, whenever the file changed
    assert checks.judge_traffic_policy(ctx, observation(tried=TRY, written_at=2000.0, kept_at=999.5)).passed
    # kept after the request from a file written before it, the file changed since: the kept copy is judged
    assert checks.judge_traffic_policy(ctx, observation(tried=TRY, written_at=2000.0, kept_at=1200.0,
                                                        kept_written_at=900.0)).passed
    late = checks.judge_traffic_policy(ctx, observation(tried=TRY, written_at=900.0, kept_at=1200.0,
                                                        kept_written_at=1100.0))
    assert not late.passed and "yourself" in late.message


@pytest.mark.parametrize("cell", [{"answers": True}, {"answers": True, "client_ip_preserved": "no"}, "yes"])
def test_a_prediction_with_a_cell_missing_is_malformed_not_wrong(judging, cell):
    # an answer predicted without saying whether the client's address is preserved cannot be graded:
    # malformed (not counted as a different wrong answer), as labkit's curl and trace tell it
    from labkit.exercises import AnswerMalformed
    checks, ctx = judging
    answer = {**RIGHT, "shop-cluster": {**RIGHT["shop-cluster"], "node1": cell}}
    with pytest.raises(AnswerMalformed) as told:
        checks.judge_traffic_policy(ctx, observation(answer=answer))
    assert "shop-cluster.node1" in told.value.message


@pytest.mark.parametrize("written_at, kept_at", [(1000.0, None), (1500.0, None), (None, None), (1500.0, 1200.0)],
                         ids=["same-moment", "after", "no-answer-file", "kept-after-the-request"])
def test_a_prediction_written_after_a_request_by_hand_earns_nothing(judging, written_at, kept_at):
    # the right prediction, written (or changed, or kept by labkit's curl) after the student's own
    # request to a graded NodePort: what the node did with it is the outcome, so it is not judged
    checks, ctx = judging
    result = checks.judge_traffic_policy(ctx, observation(tried=TRY, written_at=written_at, kept_at=kept_at))
    assert not result.passed
    assert ("you sent a request from client (192.168.50.100) to node2's NodePort 30101 (shop-local) yourself, "
            "at 12:00:00, before your prediction was recorded") in result.message
    assert "labkit reset kube-proxy traffic-policy --forget-prediction" in result.message
    assert "a reset since then" not in result.message
    before_reset = checks.judge_traffic_policy(ctx, observation(tried={**TRY, "before_reset": True},
                                                                written_at=written_at, kept_at=kept_at))
    assert "a reset since then does not undo what that request showed" in before_reset.message


def test_the_nodes_connection_logs_name_the_graded_requests(tmp_path, monkeypatch):
    # lab.hand_tries reads each node's log (labkit/netlab/synwatch.py's lines): the graded NodePorts
    # only, as built and as the Services are now, since the exercise was built, oldest first
    import json as _json
    lab = get_lab("kube-proxy")
    module = lab.environment_module()
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    moved = state.service("shop-local")
    moved["spec"]["ports"][0]["nodePort"] = 31001
    state.apply([moved], "test")
    monkeypatch.setattr(module.live, "load", lambda env: state)
    env = SimpleNamespace(lab=lab, dir=tmp_path)
    lines = {"node1": [{"at": 50.0, "src": "192.168.50.100", "sport": 1, "dst": "192.168.50.11", "dport": 30101},
                       {"at": 120.0, "src": "192.168.50.100", "sport": 2, "dst": "192.168.50.11", "dport": 30090},
                       {"at": 130.0, "src": "10.244.2.2", "sport": 3, "dst": "192.168.50.11", "dport": 30100}],
             "node2": [{"at": 110.0, "src": "192.168.50.11", "sport": 4, "dst": "192.168.50.12", "dport": 31001}]}
    for node, entries in lines.items():
        module.watch_log(env, node).write_text("".join(_json.dumps(e) + "\n" for e in entries) + "not json\n")
    tries = module.hand_tries(env, since=100.0)
    assert [(t["who"], t["node"], t["dport"], t["service"]) for t in tries] == [
        ("node1", "node2", 31001, "shop-local"), ("pod web-3", "node1", 30100, "shop-cluster")]
    assert tries[0]["what"] == "node1 (192.168.50.11) to node2's 192.168.50.12:31001 (shop-local)"
    assert module.first_try(env, 0.0)["at"] == 50.0 and module.first_try(env, 200.0) is None


def test_a_request_to_a_copy_deleted_since_is_still_a_graded_request(tmp_path, monkeypatch):
    # a Service of one's own made to copy the situation (NodePort 30200), sent a request by hand from
    # a shell, then deleted: the nodes' logs are read against the ports graded at each request's
    # time (situations.remember_outcome_node_ports, after every sync), so that request still counts;
    # one to the same port before the copy existed, or after it went, does not
    import json as _json
    from labkit.kubeproxy.situations import OUTCOME_PORTS_LOG
    lab = get_lab("kube-proxy")
    module = lab.environment_module()
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    monkeypatch.setattr(module.live, "load", lambda env: state)
    env = SimpleNamespace(lab=lab, dir=tmp_path)
    shop = {"30100": "shop-cluster", "30101": "shop-local"}
    (tmp_path / OUTCOME_PORTS_LOG).write_text("".join(_json.dumps(e) + "\n" for e in [
        {"time": 10.0, "ports": shop}, {"time": 100.0, "ports": {**shop, "30200": "mine"}},
        {"time": 200.0, "ports": shop}]) + "not json\n")
    module.watch_log(env, "node1").write_text("".join(_json.dumps(e) + "\n" for e in [
        {"at": 50.0, "src": "192.168.50.100", "sport": 1, "dst": "192.168.50.11", "dport": 30200},
        {"at": 150.0, "src": "192.168.50.100", "sport": 2, "dst": "192.168.50.11", "dport": 30200},
        {"at": 250.0, "src": "192.168.50.100", "sport": 3, "dst": "192.168.50.11", "dport": 30200}]))
    tries = module.hand_tries(env, since=0.0)
    assert [(t["at"], t["service"]) for t in tries] == [(150.0, "mine")]
    assert tries[0]["what"] == "client (192.168.50.100) to node1's 192.168.50.11:30200 (mine)"

    # what each sync logs: the graded ports when they change, nothing when they do not
    from labkit.kubeproxy.situations import outcome_port_history, remember_outcome_node_ports
    (tmp_path / OUTCOME_PORTS_LOG).unlink()
    remember_outcome_node_ports(env, state)
    remember_outcome_node_ports(env, state)
    copy = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mine", "namespace": "default"},
            "spec": {"type": "NodePort", "externalTrafficPolicy": "Local", "selector": {"app": "shop"},
                     "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30200}]}}
    state.apply([copy], "test")
    remember_outcome_node_ports(env, state)
    assert [ports for _, ports in outcome_port_history(env)] == [
        {30100: "shop-cluster", 30101: "shop-local"}, {30100: "shop-cluster", 30101: "shop-local", 30200: "mine"}]


def test_a_copy_of_the_situation_shows_the_outcome_at_its_own_node_port(lab_and_state):
    # a Service of the student's own that sends to the shop pods (Local, the same selector) shows
    # at its NodePort what shop-local's shows; one that sends to other pods does not
    env, _ = lab_and_state
    lab = get_lab("kube-proxy")
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    copy = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "mine", "namespace": "default"},
            "spec": {"type": "NodePort", "externalTrafficPolicy": "Local", "selector": {"app": "shop"},
                     "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30200}]}}
    other = {**copy, "metadata": {"name": "theirs", "namespace": "default"},
             "spec": {**copy["spec"], "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080,
                                                                              "nodePort": 30201}]}}
    state.apply([copy, other], "test")
    assert shows_outcome(env, state, "192.168.50.100", "192.168.50.12", 30200)
    assert not shows_outcome(env, state, "192.168.50.100", "192.168.50.12", 30201)
    from labkit.kubeproxy.situations import outcome_node_ports
    assert outcome_node_ports(env, state) == {30100: "shop-cluster", 30101: "shop-local", 30200: "mine"}


def test_a_copy_of_the_situation_with_other_pods_shows_the_outcome_at_its_own_node_port(lab_and_state):
    # shop-local's situation rebuilt with web's pods: a Service of one's own without selector, Local,
    # and an EndpointSlice of one's own listing web-1 and web-2 (both on node1). Its NodePort on node2
    # drops the client's request as shop-local's does: the outcome depends on the policy and on
    # which nodes have a local endpoint, not on which pods they are. With endpoints on both nodes, or
    # Cluster, it is another situation.
    env, _ = lab_and_state
    lab = get_lab("kube-proxy")
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")

    def service(name, policy, node_port):
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
                "spec": {"type": "NodePort", "externalTrafficPolicy": policy,
                         "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": node_port}]}}

    def endpoints(name, pods):
        return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": f"{name}-1", "namespace": "default",
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": [{"addresses": [state.pod(p)["status"]["podIP"]], "conditions": {"ready": True},
                               "nodeName": state.pod(p)["spec"]["nodeName"]} for p in pods]}
    state.apply([service("copy", "Local", 30200), endpoints("copy", ["web-1", "web-2"]),
                 service("spread", "Local", 30201), endpoints("spread", ["web-1", "web-3"]),
                 service("cluster", "Cluster", 30202), endpoints("cluster", ["web-1", "web-2"])], "test")
    for node in NODES:
        assert shows_outcome(env, state, "192.168.50.100", node, 30200)
        assert not shows_outcome(env, state, "192.168.50.100", node, 30201)
        assert not shows_outcome(env, state, "192.168.50.100", node, 30202)


def test_the_tools_say_when_a_request_by_hand_came_before_the_prediction(monkeypatch):
    # labkit kube-proxy curl / trace (situations.observed): refused without a prediction, and the
    # refusal says that a request sent by hand already showed the outcome; kept with one written
    # after it, with a note that the check will not grade it; no note for one written before
    from labkit.errors import LabkitError
    from labkit.exercises import answer_path
    from labkit.kubeproxy.situations import observed
    from labkit.state import LabEnv, LabState
    import yaml as _yaml
    lab = get_lab("kube-proxy")
    module = lab.environment_module()
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    env = LabEnv(lab, LabState(lab.id))
    monkeypatch.setattr(module, "earliest_try", lambda env, state=None: {**TRY, "at": 2000.0})
    path = answer_path(lab.id, "traffic-policy")
    path.unlink(missing_ok=True)
    with pytest.raises(LabkitError) as refused:
        observed(env, state, None, "192.168.50.11", 30100, "labkit kube-proxy curl")
    assert "there is no prediction" in str(refused.value)
    assert "You already sent a request to these NodePorts yourself (192.168.50.100 to node2's" in str(refused.value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_yaml.safe_dump(RIGHT))
    import os
    os.utime(path, (1000.0, 1000.0))            # written before the request
    note = observed(env, state, None, "192.168.50.11", 30100, "labkit kube-proxy curl")
    assert "keeps your traffic-policy prediction" in note and "yourself" not in note
    from labkit import predictions
    predictions.forget(lab.id, "traffic-policy", "test")
    os.utime(path, (3000.0, 3000.0))            # written after it
    note = observed(env, state, None, "192.168.50.11", 30100, "labkit kube-proxy curl")
    assert "But you sent a request to these NodePorts yourself before this prediction was written" in note


@pytest.mark.parametrize("node2_conditions, shows", [
    ({"ready": False}, True),                                        # node2 has no endpoint kube-proxy uses
    ({"ready": False, "serving": False, "terminating": True}, True),
    ({"ready": False, "serving": True, "terminating": True}, False),  # kube-proxy's fallback: node2 answers
    ({"ready": True}, False),
    ({}, False),                                                     # absent conditions are ready
])
def test_a_not_ready_endpoint_does_not_make_a_node_one_with_a_local_endpoint(lab_and_state, node2_conditions, shows):
    # a Service of one's own, Local, with a ready endpoint on node1 and one on node2 that kube-proxy
    # does not send to (pkg/proxy/topology.go CategorizeEndpoints): node2 drops the client's request
    # at its NodePort as it drops shop-local's, so the tools withhold it as the same situation
    env, _ = lab_and_state
    lab = get_lab("kube-proxy")
    state = load_scenario(lab.directory / "scenarios" / "cluster.yaml")
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "probe", "namespace": "default"},
               "spec": {"type": "NodePort", "externalTrafficPolicy": "Local",
                        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30200}]}}
    node2 = {"addresses": [state.pod("web-3")["status"]["podIP"]], "nodeName": "node2"}
    if node2_conditions:
        node2["conditions"] = node2_conditions
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": "probe-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "probe"}},
              "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
              "endpoints": [{"addresses": [state.pod("web-1")["status"]["podIP"]], "conditions": {"ready": True},
                             "nodeName": "node1"}, node2]}
    state.apply([service, slice_], "test")
    for node in NODES:
        assert shows_outcome(env, state, "192.168.50.100", node, 30200) is shows


# What Local does with a request from outside the cluster, in words ("only to its own pods", "only to
# endpoints on itself", "drops"): traffic-policy's outcome for shop-local.
LOCAL_OUTCOME_WORDS = ("own pods", "only to endpoints", "on itself", "drop", "without a local endpoint")


def test_the_nodeport_feedback_on_local_says_what_local_does_only_once_the_prediction_is_kept(judging):
    # nodeport's feedback for web set to externalTrafficPolicy Local says what is wrong and where to
    # look, not what Local does with an external client, until traffic-policy's prediction is kept
    from labkit import paths, predictions
    checks, ctx = judging
    before = checks.local_policy_words(ctx, "web")
    assert "externalTrafficPolicy Local, not Cluster" in before and "traffic-policy" in before
    assert not [w for w in LOCAL_OUTCOME_WORDS if w in before.lower()], before
    answer = paths.answer_path("kube-proxy", "traffic-policy")
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text("shop-cluster: {}\n")
    assert predictions.keep("kube-proxy", "traffic-policy", "labkit kube-proxy curl") is not None
    assert "only to its own pods" in checks.local_policy_words(ctx, "web")


def test_no_hint_or_answer_text_of_the_lab_says_what_local_does_before_the_prediction():
    lab = get_lab("kube-proxy")
    texts = [(f"{ex.id} hint {i}", h) for ex in lab.exercises for i, h in enumerate(ex.hints, start=1)]
    texts += [(f"{ex.id} prompt", ex.prompt) for ex in lab.exercises]
    told = [(where, w) for where, text in texts for w in LOCAL_OUTCOME_WORDS if w in text.lower()]
    assert not told, told
