"""kubelet's resource managers end to end: machines, configuration, QoS, admission, checkpoints."""

from __future__ import annotations

import json

import pytest
import yaml

from labkit.errors import ConfigError, LabkitError
from labkit.numa import checkpoint
from labkit.numa.admission import KubeletStartError, Node
from labkit.numa.config import config_from_dict
from labkit.numa.machine import fixture_names, load_machine, machine_from_dict
from labkit.numa.pods import BEST_EFFORT, BURSTABLE, GUARANTEED, pod_from_dict, qos_class
from labkit.quantity import Quantity

GiB = 1 << 30


def config(**fields):
    return config_from_dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", **fields})


def pod(name, *containers, init=(), uid=None):
    meta = {"name": name, **({"uid": uid} if uid else {})}
    return pod_from_dict({"metadata": meta, "spec": {"containers": list(containers), "initContainers": list(init)}})


def container(name, cpu=None, memory=None, requests=None, **extra):
    limits = {k: v for k, v in {"cpu": cpu, "memory": memory, **extra}.items() if v is not None}
    resources = {"limits": limits} if limits else {}
    if requests:
        resources["requests"] = requests
    return {"name": name, "resources": resources}


STATIC = dict(cpuManagerPolicy="static", reservedSystemCPUs="0,8")


# -- machines ---------------------------------------------------------------------------------------

def test_every_shipped_machine_loads_and_the_lab_machine_is_what_the_lab_text_describes():
    assert set(fixture_names()) >= {"single-socket-ht", "dual-socket-ht", "dual-socket-no-ht",
                                    "dual-socket-multi-numa-ht", "quad-socket-four-way-ht", "lab-two-node"}
    for name in fixture_names():
        assert load_machine(name).num_cores == len(load_machine(name).all_cpus())
    lab = load_machine("lab-two-node")
    assert [n.cpus() for n in lab.nodes] == [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]
    assert {r: [(d.id, d.numa_nodes) for d in devs] for r, devs in lab.devices.items()} == {
        "example.com/gpu": [("gpu0", (0,)), ("gpu1", (1,))], "example.com/nic": [("nic0", (0,)), ("nic1", (1,))]}


@pytest.mark.parametrize("change, field", [
    (lambda m: m.pop("num_cores"), "num_cores"),
    (lambda m: m.update(num_cores=3), "num_cores"),
    (lambda m: m["topology"][1]["cores"][0].update(thread_ids=[0]), "topology"),
    (lambda m: m["topology"][0].update(distances=[10]), "topology[0].distances"),
    (lambda m: m["topology"][0]["cores"][0].update(socket_id="zero"), "topology[0].cores[0].socket_id"),
    (lambda m: m.update(devices={"gpu": []}), "devices.gpu"),
])
def test_a_broken_machine_is_refused_naming_the_file_and_field(change, field):
    data = json.loads(json.dumps(load_machine("dual-socket-ht").to_dict()))
    change(data)
    with pytest.raises(ConfigError) as error:
        machine_from_dict(data, "m.json")
    assert str(error.value).startswith(f"m.json: {field}: ")


def test_an_unknown_machine_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="shipped: .*lab-two-node"):
        load_machine("no-such-machine")


# -- quantities, QoS ---------------------------------------------------------------------------------

def test_quantities_round_up_and_print_canonically():
    assert Quantity.parse("500m").milli_value() == 500 and Quantity.parse("500m").value_int() == 1
    assert Quantity.parse("1.5Gi").as_int64() == 1536 * 1024 * 1024 and Quantity.parse("1500m").as_int64() is None
    total = Quantity.parse("16Gi").add(Quantity.parse("100Mi"))
    assert str(total) == "16484Mi" and str(Quantity.parse("1500m")) == "1500m" and str(Quantity.parse("2000")) == "2k"


def test_qos_classes_follow_the_summed_requests_and_limits():
    assert qos_class(pod("g", container("c", cpu="2", memory="1Gi"))) == GUARANTEED
    assert qos_class(pod("b", container("c", requests={"cpu": "100m"}))) == BURSTABLE
    assert qos_class(pod("e", container("c"))) == BEST_EFFORT
    # zero quantities do not count; every container needs cpu and memory limits
    assert qos_class(pod("z", container("c", cpu="0", memory="0"))) == BEST_EFFORT
    assert qos_class(pod("m", container("a", cpu="1", memory="1Gi"), container("b", memory="1Gi"))) == BURSTABLE
    # an init container is part of the decision too
    assert qos_class(pod("i", container("a", cpu="1", memory="1Gi"), init=[container("i", requests={"cpu": "1"})])) == BURSTABLE


# -- configuration --------------------------------------------------------------------------------

def test_kubelet_validation_messages():
    with pytest.raises(LabkitError, match=r'topologyManagerPolicy \(--topology-manager-policy\) "strict" must be one of: '
                                          r'\["none" "best-effort" "restricted" "single-numa-node"\]'):
        config(topologyManagerPolicy="strict")
    with pytest.raises(LabkitError) as error:
        config(topologyManagerScope="node", reservedSystemCPUs="0-a")
    assert str(error.value).count("invalid configuration") == 2 and "[" in str(error.value)
    with pytest.raises(ConfigError, match="cpuManagerPolicyOptions.full-pcpus-only: expected a string"):
        config(cpuManagerPolicyOptions={"full-pcpus-only": True})
    with pytest.raises(LabkitError, match="unrecognized feature gate: TopologyManager"):
        config(featureGates={"TopologyManager": True})
    assert config(topologyManagerPolicyy="restricted").warnings[0].endswith("(did you mean 'topologyManagerPolicy'?)")


def test_node_allocatable_reservation_includes_hard_eviction():
    machine = load_machine("lab-two-node")
    reservation = config(systemReserved={"memory": "1Gi", "cpu": "500m"}).node_allocatable_reservation(machine)
    assert str(reservation["memory"]) == "1124Mi" and str(reservation["cpu"]) == "500m"
    # reservedSystemCPUs replaces the cpu reservations by the size of the set
    assert str(config(reservedSystemCPUs="0,8", kubeReserved={"cpu": "3"}).node_allocatable_reservation(machine)["cpu"]) == "2"


@pytest.mark.parametrize("fields, message", [
    # a zero reservation is left out of node allocatable, so kubelet finds no CPU reservation at all
    (dict(cpuManagerPolicy="static"), "[cpumanager] unable to determine reserved CPU resources for static policy"),
    (dict(cpuManagerPolicy="dynamic"), 'unknown policy: "dynamic"'),
    (dict(cpuManagerPolicyOptions={"full-pcpus-only": "true"}), "new none policy error: None policy: received unsupported options=map[full-pcpus-only:true]"),
    (dict(STATIC, cpuManagerPolicyOptions={"align-by-socket": "true"}), 'Alpha-level Options not enabled, but option "align-by-socket" provided'),
    (dict(STATIC, cpuManagerPolicyOptions={"full-pcpus-only": "yes"}), 'bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax'),
    (dict(memoryManagerPolicy="Static"), 'the total amount "0" of type "memory" is not equal to the value "100Mi" determined by Node Allocatable feature'),
    (dict(memoryManagerPolicy="Static", reservedMemory=[{"numaNode": 3, "limits": {"memory": "100Mi"}}]),
     "the reserved memory configuration references a NUMA node 3 that does not exist on this machine"),
    (dict(topologyManagerPolicy="best-effort", topologyManagerPolicyOptions={"max-allowable-numa-nodes": "4"}),
     'the minimum value of "max-allowable-numa-nodes" should not be less than 8'),
    (dict(topologyManagerPolicy="best-effort", topologyManagerPolicyOptions={"prefer-most-allocated": "true"}),
     'unknown Topology Manager Policy option: "prefer-most-allocated"'),
    (dict(reservedSystemCPUs="0,99", cpuManagerPolicy="static"), "reservedSystemCPUs: 0,99 is not a subset of online-cpus: 0-15"),
])
def test_kubelet_refuses_to_start(fields, message):
    with pytest.raises(LabkitError) as error:
        Node(load_machine("lab-two-node"), config(**fields))
    assert message in str(error.value)


# -- admission ------------------------------------------------------------------------------------

def gpu_pod(name="gpus"):
    return pod(name, container("c", cpu="2", memory="1Gi", **{"example.com/gpu": "2"}))


@pytest.mark.parametrize("policy, admitted, reason", [
    ("none", True, ""), ("best-effort", True, ""), ("restricted", False, "TopologyAffinityError"),
    ("single-numa-node", False, "TopologyAffinityError"),
])
def test_two_gpus_force_both_nodes_which_only_lenient_policies_accept(policy, admitted, reason):
    node = Node(load_machine("lab-two-node"), config(topologyManagerPolicy=policy, **STATIC))
    [result] = node.admit_all([gpu_pod()])
    assert (result.admitted, result.result.reason) == (admitted, reason)
    if reason:
        assert result.result.message == "Resources cannot be allocated with Topology locality"
        assert not node.cpu_state.assignments and not node.devices.allocated   # released again
    if policy in ("best-effort", "restricted"):
        assert result.containers[0].best_hint.to_json() == {"mask": [0, 1], "preferred": False}


def test_static_policy_packs_guaranteed_containers_and_leaves_the_rest_shared():
    node = Node(load_machine("lab-two-node"), config(topologyManagerPolicy="single-numa-node", **STATIC))
    results = node.admit_all([pod("a", container("c", cpu="2", memory="1Gi")),
                              pod("b", container("c", cpu="4", memory="1Gi")),
                              pod("s", container("c", requests={"cpu": "250m"})),
                              pod("f", container("c", cpu="1500m", memory="1Gi"))])
    assert [sorted(r.containers[0].cpus) for r in results[:2]] == [[1, 9], [2, 3, 10, 11]]
    shared = sorted(node.shared_pool())
    assert shared == [0, 4, 5, 6, 7, 8, 12, 13, 14, 15]
    assert [(sorted(r.containers[0].cpus), r.containers[0].exclusive) for r in results[2:]] == [(shared, False)] * 2


def test_full_pcpus_only_rejects_odd_requests_with_an_smt_alignment_error():
    node = Node(load_machine("lab-two-node"), config(cpuManagerPolicyOptions={"full-pcpus-only": "true"}, **STATIC))
    [result] = node.admit_all([pod("odd", container("c", cpu="3", memory="1Gi"))])
    assert (result.admitted, result.result.reason) == (False, "SMTAlignmentError")
    assert result.result.message == "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"


def test_an_init_containers_cpus_are_reused_by_the_app_container():
    node = Node(load_machine("single-socket-ht"), config(cpuManagerPolicy="static", kubeReserved={"cpu": "1"}))
    [result] = node.admit_all([pod("p", container("app", cpu="2", memory="1Gi"), init=[container("init", cpu="4", memory="1Gi")])])
    cpus = {c.name: sorted(c.cpus) for c in result.containers}
    assert cpus == {"init": [1, 2, 5, 6], "app": [1, 5]}


def test_pod_scope_merges_once_for_the_whole_pod():
    def node(scope):
        return Node(load_machine("lab-two-node"), config(topologyManagerPolicy="single-numa-node",
                                                         topologyManagerScope=scope, **STATIC))
    [result] = node("pod").admit_all([pod("p", container("a", cpu="3", memory="1Gi"), container("b", cpu="3", memory="1Gi"))])
    assert result.admitted and result.scope == "pod"
    assert {c.best_hint.mask for c in result.containers} == {0b1}
    # 5 + 4 CPUs: no NUMA node has 9, so the Pod as a whole is refused; container by container it fits
    big = pod("q", container("a", cpu="5", memory="1Gi"), container("b", cpu="4", memory="1Gi"))
    [as_pod] = node("pod").admit_all([big])
    assert (as_pod.admitted, as_pod.result.reason) == (False, "TopologyAffinityError")
    [per_container] = node("container").admit_all([big])
    assert per_container.admitted
    assert [c.best_hint.mask for c in per_container.containers] == [0b1, 0b10]


MEMORY = dict(memoryManagerPolicy="Static", systemReserved={"memory": "924Mi"},
              reservedMemory=[{"numaNode": 0, "limits": {"memory": "512Mi"}}, {"numaNode": 1, "limits": {"memory": "512Mi"}}])


def test_memory_groups_a_pod_is_refused_although_two_nodes_have_enough_free_memory_together():
    node = Node(load_machine("lab-two-node"), config(**MEMORY, **STATIC))
    allocatable = [node.memory_state.machine_state[n].memory_map["memory"].allocatable for n in (0, 1)]
    assert allocatable == [6 * GiB - 512 * 1024 * 1024] * 2     # 8Gi - 512Mi reserved - 2Gi of hugepages
    first, second, third = node.admit_all([pod("a", container("c", cpu="1", memory="4Gi")),
                                           pod("b", container("c", cpu="1", memory="4Gi")),
                                           pod("c", container("c", cpu="1", memory="2Gi"))])
    assert first.containers[0].memory_nodes == [0] and second.containers[0].memory_nodes == [1]
    free = sum(node.memory_state.machine_state[n].memory_map["memory"].free for n in (0, 1))
    assert free >= 2 * GiB   # the two nodes' free memory adds up ...
    # ... but both are used single-NUMA, so they cannot form a group for the third Pod
    assert (third.admitted, third.result.reason) == (False, "UnexpectedAdmissionError")
    assert third.result.message == ("Allocate failed due to [memorymanager] failed to get the default NUMA affinity, "
                                    "no NUMA nodes with enough memory is available, which is unexpected")


def test_checkpoints_are_written_in_kubelets_format_and_read_back(tmp_path):
    machine, cfg = load_machine("lab-two-node"), config(**MEMORY, **STATIC)
    node = Node(machine, cfg, tmp_path)
    [result] = node.admit_all([pod("a", container("c", cpu="2", memory="1Gi"))])
    node.save()
    text = (tmp_path / "cpu_manager_state").read_text()
    data = json.loads(text)
    assert list(data) == ["policyName", "defaultCpuSet", "entries", "checksum"] and "\n" not in text
    assert data["defaultCpuSet"] == "0,2-8,10-15" and data["entries"] == {result.pod.uid: {"c": "1,9"}}
    assert data["checksum"] == checkpoint.cpu_checksum("static", "0,2-8,10-15", data["entries"])
    memory = json.loads((tmp_path / "memory_manager_state").read_text())
    assert memory["policyName"] == "Static" and memory["entries"][result.pod.uid]["c"][0]["numaAffinity"] == [0]
    # the next run starts from the checkpoints: the Pod keeps its CPUs, new Pods get others
    again = Node(machine, cfg, tmp_path)
    readmitted, other = again.admit_all([pod("a", container("c", cpu="2", memory="1Gi")),
                                         pod("b", container("c", cpu="2", memory="1Gi"))])
    assert sorted(readmitted.containers[0].cpus) == [1, 9] and sorted(other.containers[0].cpus) == [2, 10]


def test_a_corrupted_or_foreign_checkpoint_stops_kubelet(tmp_path):
    machine, cfg = load_machine("lab-two-node"), config(**STATIC)
    node = Node(machine, cfg, tmp_path)
    node.admit_all([pod("a", container("c", cpu="2", memory="1Gi"))])
    node.save()
    path = tmp_path / "cpu_manager_state"
    good = path.read_text()
    path.write_text(good.replace('"defaultCpuSet":"0,2-8,10-15"', '"defaultCpuSet":"0-8,10-15"'))
    with pytest.raises(KubeletStartError) as error:
        Node(machine, cfg, tmp_path)
    assert str(error.value) == (f"kubelet would not start: start cpu manager error: could not restore state from "
                                f"checkpoint: checkpoint is corrupted, please drain this node and delete the CPU manager "
                                f'checkpoint file "{path}" before restarting Kubelet')
    path.write_text(good)
    with pytest.raises(KubeletStartError, match='configured policy "none" differs from state checkpoint policy "static"'):
        Node(machine, config(), tmp_path)
    # a consistent checkpoint whose CPUs do not match the machine: validateState refuses it
    data = json.loads(good)
    data["defaultCpuSet"] = "0,2-8,10-14"
    data["checksum"] = checkpoint.cpu_checksum("static", data["defaultCpuSet"], data["entries"])
    path.write_text(json.dumps(data))
    with pytest.raises(KubeletStartError, match="current set of available CPUs \"0-15\" doesn't match with CPUs in state"):
        Node(machine, cfg, tmp_path)
    # the documented repair: delete the file (after draining the node)
    path.unlink()
    assert Node(machine, cfg, tmp_path).cpu_state.default_cpu_set == frozenset(range(16))


def test_memory_checkpoint_checksum_matches_kubelets_test_vector():
    machine = {"0": {"numberOfAssignments": 0, "memoryMap": {"memory": {"total": 2048, "systemReserved": 512,
               "allocatable": 1536, "reserved": 512, "free": 1024}}, "cells": []}}
    entries = {"pod": {"container1": [{"numaAffinity": [0], "type": "memory", "size": 512}]}}
    # memorymanager/state/state_checkpoint_test.go, "Restore checkpoint from v1 (migration)"
    assert checkpoint.memory_checksum("static", machine, entries) == 4215593881


def test_pods_files_report_the_broken_field(tmp_path):
    path = tmp_path / "pods.yaml"
    path.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"name": "p"},
                                    "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "two"}}}]}}))
    from labkit.numa.pods import load_pods
    with pytest.raises(ConfigError) as error:
        load_pods(path)
    assert str(error.value).startswith(f"{path}: spec.containers[0].resources.limits.cpu: 'two': quantities must match")


def test_the_qos_class_comes_from_the_spec_never_from_a_status_in_the_file():
    # the API server computes status.qosClass itself when it creates the Pod (PrepareForCreate)
    spoofed = pod_from_dict({"metadata": {"name": "p"}, "status": {"qosClass": "Guaranteed"},
                             "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "10"}}}]}})
    assert qos_class(spoofed) == BURSTABLE
    node = Node(load_machine("lab-two-node"), config_from_dict(
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cpuManagerPolicy": "static",
         "reservedSystemCPUs": "0", "topologyManagerPolicy": "single-numa-node"}))
    (result,) = node.admit_all([spoofed])
    assert result.admitted and not result.containers[0].exclusive and result.qos == BURSTABLE


@pytest.mark.parametrize("resources, message", [
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
     'spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
     'spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
    ({"requests": {"cpu": "1", "hugepages-2Mi": "2Mi"}, "limits": {"cpu": "1", "hugepages-2Mi": "4Mi"}},
     'spec.containers[0].resources.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi'),
    ({"requests": {"cpu": "1", "example.com/gpu": "1"}},
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ({"limits": {"hugepages-2Mi": "2Mi"}}, "spec.containers[0].resources: Forbidden: HugePages require cpu or memory"),
    ({"requests": {"cpu": "-1"}},
     'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
])
def test_the_api_servers_validation_of_requests_and_limits(resources, message):
    from labkit.numa.pods import PodInvalid

    with pytest.raises(PodInvalid) as info:
        pod_from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": resources}]}})
    assert info.value.problem == f'The Pod "p" is invalid: {message}'


def test_pod_level_resources_are_refused_as_not_reconstructed():
    with pytest.raises(ConfigError, match="spec.resources: pod-level resources are not part of labkit's"):
        pod_from_dict({"metadata": {"name": "p"}, "spec": {"resources": {"limits": {"cpu": "2"}},
                                                            "containers": [{"name": "c"}]}})


def test_a_finished_init_containers_memory_goes_back_when_the_next_container_starts():
    node = Node(load_machine("lab-two-node"), config_from_dict(
        {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cpuManagerPolicy": "static",
         "reservedSystemCPUs": "0", "topologyManagerPolicy": "best-effort", "memoryManagerPolicy": "Static",
         "systemReserved": {"memory": "924Mi"}, "reservedMemory": [{"numaNode": 0, "limits": {"memory": "512Mi"}},
                                                                  {"numaNode": 1, "limits": {"memory": "512Mi"}}]}))
    pod = pod_from_dict({"metadata": {"name": "p"}, "spec": {
        "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "1", "memory": "3Gi"}}},
                           {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
        "containers": [{"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}})
    (result,) = node.admit_all([pod])
    assert result.admitted and set(node.memory_state.assignments[pod.uid]) == {"init", "sidecar", "app"}
    for container in ("init", "sidecar", "app"):        # kubelet starts them in order
        node.add_container(pod, container)
    assert set(node.memory_state.assignments[pod.uid]) == {"sidecar", "app"}
    reserved = sum(s.memory_map["memory"].reserved for s in node.memory_state.machine_state.values())
    assert reserved == 2 * 2**30


def test_pods_no_longer_on_the_node_release_what_the_checkpoints_held(tmp_path):
    cfg = config_from_dict({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                            "cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static",
                            "topologyManagerPolicy": "best-effort", "systemReserved": {"memory": "924Mi"},
                            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "512Mi"}},
                                               {"numaNode": 1, "limits": {"memory": "512Mi"}}]})
    big = pod_from_dict({"metadata": {"name": "big"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "7Gi"}}}]}})
    node = Node(load_machine("lab-two-node"), cfg, tmp_path)
    node.admit_all([big])
    node.save()
    again = Node(load_machine("lab-two-node"), cfg, tmp_path)
    assert again.remove_stale_state({"someone-else"}) == [big.uid]      # big was drained
    assert again.memory_state.assignments == {} and again.cpu_state.assignments == {}
    assert all(s.memory_map["memory"].reserved == 0 for s in again.memory_state.machine_state.values())
