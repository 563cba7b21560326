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
    assert prediction_problem([], names, nodes)


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
