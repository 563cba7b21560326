"""In-process judgement of the numa lab's pin exercise on an observation of the live node (what
observe_pin reads): the student's Pods count in whatever namespace their file puts them, named as
`name` or `namespace/name`; only the node agent is the lab's own. No lab is built."""

from __future__ import annotations

import pytest

from labkit.exercises import CheckFailed
from test_namespace_judging import checks, context

MACHINE = {"topology": [{"node_id": 0, "memory": 1 << 30,
                         "cores": [{"core_id": 0, "thread_ids": [0], "socket_id": 0},
                                   {"core_id": 1, "thread_ids": [1], "socket_id": 0}]}]}


def _container(namespace, pod, qos, pid, cpus, exclusive=False):
    return {"pod": pod, "namespace": namespace, "qos": qos, "container": "app", "init": False,
            "exclusive": exclusive, "want_cpus": cpus, "pids": {pid: cpus}}


def _seen(ctx, answer, guaranteed_ns="team", burstable_ns="default", extra=()):
    return {"answer": answer, "shared_pool": [0], "reserved": [0], "machine": MACHINE,
            "config": ctx.lab.environment_module().live_config(MACHINE),
            "containers": [_container("kube-system", "node-agent", "BestEffort", 10, [0]),
                           _container(guaranteed_ns, "solo", "Guaranteed", 20, [1], exclusive=True),
                           _container(burstable_ns, "mixed", "Burstable", 30, [0]), *extra]}


def _answer(guaranteed="solo", burstable="mixed"):
    return {"guaranteed": {"pod": guaranteed, "pid": 20, "cpus_allowed_list": "1"},
            "burstable": {"pod": burstable, "pid": 30, "cpus_allowed_list": "0"}}


@pytest.mark.parametrize("name", ["solo", "team/solo"])
def test_a_pod_the_student_ran_in_another_namespace_counts(name):
    """It was refused as "the lab's own, in namespace team" (any namespace but default was)."""
    ctx = context("numa", "pin")
    result = checks("numa").judge_pin(ctx, _seen(ctx, _answer(guaranteed=name)))
    assert result.status == "pass", result.message
    assert "team/solo" in result.message


def test_the_node_agent_is_the_labs_own_and_a_missing_pod_lists_every_pod_the_student_runs():
    ctx = context("numa", "pin")
    with pytest.raises(CheckFailed) as failed:
        checks("numa").judge_pin(ctx, _seen(ctx, _answer(burstable="node-agent")))
    assert "Pod kube-system/node-agent is the lab's own" in failed.value.message
    with pytest.raises(CheckFailed) as failed:
        checks("numa").judge_pin(ctx, _seen(ctx, _answer(burstable="nosuch")))
    assert "(running: mixed, team/solo)" in failed.value.message


def test_a_name_in_two_namespaces_asks_for_the_namespace():
    ctx = context("numa", "pin")
    other = _container("other", "solo", "Guaranteed", 40, [1], exclusive=True)
    with pytest.raises(CheckFailed) as failed:
        checks("numa").judge_pin(ctx, _seen(ctx, _answer(), extra=[other]))
    assert "write which one as <namespace>/solo" in failed.value.message
