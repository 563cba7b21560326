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
