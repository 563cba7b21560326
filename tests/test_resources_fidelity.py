"""The resources lab's mechanism against cases from Kubernetes' own unit tests
(tests/fidelity/resources/, each file names the test it comes from): cgroup numbers, QoS classes,
oom_score_adj, the eviction manager's ranking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.quantity import Quantity
from labkit.resources import eviction, kubelet
from labkit.pods import Container, Pod, pod_from_dict, qos_class

TABLES = Path(__file__).resolve().parent / "fidelity" / "resources"


def table(name: str) -> dict:
    return json.loads((TABLES / name).read_text())


def pod(spec: dict, name: str = "pod") -> Pod:
    """As the upstream tests hand Pods to kubelet's code: as written, no API server defaulting."""
    return pod_from_dict({"metadata": {"name": name}, "spec": spec}, defaulting=False, validation=False)


HELPERS = table("cm_helpers.json")


@pytest.mark.parametrize("milli,shares", HELPERS["milli_cpu_to_shares"]["cases"])
def test_milli_cpu_to_shares(milli, shares):
    assert kubelet.milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize("milli,quota", HELPERS["milli_cpu_to_quota"]["cases"])
def test_milli_cpu_to_quota(milli, quota):
    assert kubelet.milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize("milli,read_back", HELPERS["v2_round_trip"]["cases"])
def test_shares_to_weight_and_back_as_kubelet_reads_v2(milli, read_back):
    weight = kubelet.shares_to_weight(kubelet.milli_cpu_to_shares(milli))
    assert (weight - 1) * 262142 // 9999 + 2 == read_back


@pytest.mark.parametrize("case", HELPERS["resource_config_for_pod"]["cases"], ids=lambda c: c["description"])
def test_resource_config_for_pod(case):
    got = kubelet.pod_cgroup(pod(case["spec"]), enforce_cpu_limits=case["enforceCPULimits"])
    expected = case["expected"]
    assert (got.cpu_shares, got.cpu_quota, got.cpu_period, got.memory_limit) == \
        (expected["cpu_shares"], expected["cpu_quota"], expected["cpu_period"], expected["memory"])


@pytest.mark.parametrize("case", table("qos.json")["cases"], ids=lambda c: c["name"])
def test_compute_pod_qos(case):
    assert qos_class(pod(case["spec"], case["name"])) == case["expected"]


@pytest.mark.parametrize("case", table("oom_score_adj.json")["cases"], ids=lambda c: c["name"])
def test_container_oom_score_adjust(case):
    the_pod = pod(case["spec"], case["name"])
    for container in the_pod.all_containers():
        low, high = case["expected"][container.name]
        assert low <= kubelet.oom_score_adj(the_pod, container, case["memoryCapacity"]) <= high, container.name


COMPARATORS = {"exceedMemoryRequests": eviction.exceed_memory_requests, "priority": eviction.priority,
               "memory": eviction.memory}


def candidate(data: dict) -> eviction.Candidate:
    requests = {"memory": Quantity.parse(data["memory_request"])} if data["memory_request"] else {}
    the_pod = Pod(data["name"], "default", data["name"], "", [Container(data["name"], requests)],
                  priority=data["priority"])
    usage = Quantity.parse(data["usage"]).value_int() if data["usage"] else 0
    return eviction.Candidate(the_pod, usage, requests["memory"].value_int() if requests else 0)


@pytest.mark.parametrize("case", table("eviction_ranking.json")["cases"], ids=lambda c: c["test"])
def test_eviction_ranking(case):
    by_name = {p["name"]: candidate(p) for p in case["pods"]}
    pods = [by_name[name] for name in case["input"]]
    ranked = sorted(pods, key=eviction.ordered_by(*(COMPARATORS[c] for c in case["compare"])))
    assert [c.pod.name for c in ranked] == case["expected"]


def test_rank_is_the_three_comparators_in_kubelets_order():
    case = next(c for c in table("eviction_ranking.json")["cases"] if c["test"] == "TestOrderedByPriorityMemory")
    by_name = {p["name"]: candidate(p) for p in case["pods"]}
    assert [c.pod.name for c in eviction.rank([by_name[n] for n in case["input"]])] == case["expected"]
