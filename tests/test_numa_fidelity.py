"""Every fidelity table: the shared ones (/work/shared/fidelity/numa/, from kubelet's unit tests) and
labkit's own (tests/fidelity/numa/, transcribed from the upstream tests each file names).

Tables are dispatched on their `schema` and, inside, on the Go test they come from. A table or test
kind without a runner fails, so no table is ever skipped silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from labkit.numa import bitmask, checkpoint, cpuset
from labkit.numa.cpu_assignment import (CPUAccumulator, CPUAllocationError, take_by_topology_numa_distributed,
                                        take_by_topology_numa_packed)
from labkit.numa.cpumanager import CPUManagerError, CPUState, SMTAlignmentError, StaticPolicy, StaticPolicyOptions
from labkit.numa.machine import Machine, Node, load_machine, machine_from_dict
from labkit.numa.memorymanager import (Block, MemoryManagerError, MemoryState, MemoryTable, NUMANodeState,
                                       StaticPolicy as MemoryStaticPolicy, nodes_from_topology)
from labkit.numa.merge import (HintMerger, NUMAInfo, Policy, TopologyHint, filter_single_numa_hints, hints_from_json,
                               max_of_min_affinity_counts, new_numa_info)
from labkit.numa.pods import pod_from_dict, qos_class
from labkit.numa.topology import CPUTopology
from labkit.numa.topologymanager import TopologyManager, TopologyManagerError
from support import shared_fidelity

SHARED = Path(os.environ.get("LABKIT_NUMA_FIDELITY") or shared_fidelity("numa") or "/work/shared/fidelity/numa")
OWN = Path(__file__).resolve().parent / "fidelity" / "numa"
TABLE_FILES = sorted(SHARED.glob("*.json")) + sorted(OWN.glob("*.json"))
TOPOLOGY_FIXTURES = json.loads((SHARED / "cpu_topologies.json").read_text())["fixtures"]
TOPOLOGIES = {name: CPUTopology.from_table(fixture) for name, fixture in TOPOLOGY_FIXTURES.items()}
# labkit's shipped machines built from kubelet's test topologies
SHIPPED_FROM_TABLE = {"single-socket-ht": "topoSingleSocketHT", "dual-socket-ht": "topoDualSocketHT",
                      "dual-socket-no-ht": "topoDualSocketNoHT", "dual-socket-multi-numa-ht": "topoDualSocketMultiNumaPerSocketHT",
                      "quad-socket-four-way-ht": "topoQuadSocketFourWayHT"}


def hint(data) -> TopologyHint | None:
    return None if data is None else TopologyHint.from_json(data)


def case_list(test) -> list:
    return test["cases"] if isinstance(test, dict) else test


# -- one runner per kind of table ----------------------------------------------------------------

def run_bitmask(name: str, case: dict) -> None:
    new = lambda bits: bitmask.new_bitmask(*(bits or []))
    if name == "TestNewEmptyBitMask":
        assert bitmask.to_string(0) == case["expected_string"]
    elif name == "TestNewBitMask":
        assert bitmask.to_string(new(case["bits"])) == case["expected_string"]
    elif name == "TestAdd":
        mask = 0
        try:
            mask = bitmask.add(mask, *case["bits"])
        except ValueError:
            pass
        assert bitmask.to_string(mask) == case["expected_string"]
    elif name == "TestRemove":
        mask = new(case["set"])
        try:
            mask = bitmask.remove(mask, *case["remove"])
        except ValueError:
            pass
        assert bitmask.to_string(mask) == case["expected_string"]
    elif name in ("TestAnd", "TestOr"):
        masks = [new(m) for m in case["masks"]]
        result = (bitmask.and_ if name == "TestAnd" else bitmask.or_)(masks[0], *masks)
        assert bitmask.to_string(result) == case["expected_string"]
    elif name == "TestClear":
        assert bitmask.to_string(0) == case["expected_string"]
    elif name == "TestFill":
        assert bitmask.to_string(bitmask.FULL) == case["expected_string"]
    elif name == "TestIsEmpty":
        assert (new(case["mask"]) == 0) == case["expected"]
    elif name == "TestIsSet":
        assert bitmask.is_set(new(case["mask"]), case["bit"]) == case["expected"]
    elif name == "TestAnySet":
        assert bitmask.any_set(new(case["mask"]), case["bits"]) == case["expected"]
    elif name == "TestIsEqual":
        assert (new(case["first"]) == new(case["second"])) == case["expected"]
    elif name == "TestCount":
        assert bitmask.count(new(case["bits"])) == case["expected"]
    elif name == "TestGetBits":
        assert bitmask.get_bits(new(case["bits"])) == (case["expected"] or [])
    elif name == "TestIsNarrowerThan":
        assert bitmask.is_narrower_than(new(case["first"]), new(case["second"])) == case["expected_first_narrower"]
    elif name == "TestIterateBitMasks":
        assert sum(1 for _ in bitmask.iterate_bitmasks(list(range(case["numbits"])))) == case["expected_count"]
    elif name in ("TestIsLessThan", "TestIsGreaterThan"):
        first, second = new(case["first"]), new(case["second"])
        got = bitmask.is_less_than(first, second) if name == "TestIsLessThan" else bitmask.is_greater_than(first, second)
        assert got == case["expected"]
    else:
        pytest.fail(f"no runner for bitmask test {name}")


def run_merge(table: dict, case: dict, policy_name: str | None = None) -> None:
    policy_name = policy_name or case["policy"]
    info = table["numa_infos"][case["numa_info"]] if case.get("numa_info") else {}
    nodes = case.get("numa_nodes") or info.get("nodes")
    distances = {int(k): v for k, v in (info.get("distances") or {}).items()}
    expected = TopologyHint.from_json(case["expected_hint"])
    if isinstance(case["expected_hint"].get("mask"), str):   # "ALL" in unexpanded case groups
        expected = TopologyHint(bitmask.new_bitmask(*nodes), case["expected_hint"]["preferred"])
    providers = hints_from_json(case["providers"])
    for brute_force in (False, True):
        result = Policy(policy_name, NUMAInfo(nodes, distances), case.get("prefer_closest_numa", False),
                        brute_force=brute_force).merge(providers)
        assert (result.hint, brute_force) == (expected, brute_force)
        if policy_name == case["policy"] and "expected_admit" in case:
            assert result.admit == case["expected_admit"]
        if policy_name == "restricted":
            assert result.admit == expected.preferred


def run_hint_merger(name: str, case: dict) -> None:
    if name == "TestMaxOfMinAffinityCounts":
        lists = [[TopologyHint.from_json(h) for h in hints] for hints in case["hints"]]
        assert max_of_min_affinity_counts(lists) == case["expected"]
    elif name in ("TestCompareHintsNarrowest", "TestCompareHints"):
        merger = HintMerger(NUMAInfo([]), [], "best-effort")
        merger.best_non_preferred_affinity_count = case["best_non_preferred_affinity_count"]
        current, candidate = hint(case["current"]), hint(case["candidate"])
        result = merger.compare(current, candidate)
        assert result is {"current": current, "candidate": candidate}[case["expected"]]
    elif name == "TestPolicySingleNumaNodeFilterHints":
        lists = [[TopologyHint.from_json(h) for h in hints] for hints in case["all_resources"]]
        expected = [[TopologyHint.from_json(h) for h in hints or []] for hints in case["expected"] or []]
        assert filter_single_numa_hints(lists) == expected
    elif name == "TestCanAdmitPodResult":
        policy = Policy(case["policy"], NUMAInfo([0, 1]))
        assert policy.can_admit(TopologyHint.from_json(case["hint"])) == case["expected"]
    elif name == "TestNUMAInfo":
        topology = [(node["id"], node["distances"]) for node in case["topology"]]
        try:
            info = new_numa_info(topology, case["prefer_closest_numa"])
        except ValueError as exc:
            assert case["expected_error"] and case["expected_error"] in str(exc)
            return
        assert not case["expected_error"]
        assert (info.nodes, {str(k): v for k, v in info.distances.items()}) == \
               (case["expected_nodes"], case["expected_distances"])
    elif name == "TestCalculateAvgDistanceFor":
        info = NUMAInfo(case["bits"], {int(k): v for k, v in case["distances"].items()})
        assert info.average_distance(bitmask.new_bitmask(*case["bits"])) == case["expected"]
    elif name == "TestClosest":
        info = NUMAInfo([], {int(k): v for k, v in case["distances"].items()})
        current, candidate = bitmask.new_bitmask(*case["current"]), bitmask.new_bitmask(*case["candidate"])
        result = info.closest(candidate, current)
        assert result == {"current": current, "candidate": candidate}[case["expected"]]
    else:
        pytest.fail(f"no runner for hint merger test {name}")


def run_cpu_assignment(name: str, case: dict) -> None:
    topo = TOPOLOGIES[case["topology"]]
    if name.startswith("TestCPUAccumulator"):
        acc = CPUAccumulator(topo, case["available"], case.get("num_cpus", 0))
        if name == "TestCPUAccumulatorFreeSockets":
            assert sorted(acc.free_sockets()) == case["expected"]
        elif name == "TestCPUAccumulatorFreeNUMANodes":
            assert acc.free_numa_nodes() == case["expected"]
        elif name == "TestCPUAccumulatorFreeSocketsAndNUMANodes":
            assert (acc.free_numa_nodes(), acc.free_sockets()) == (case["expected_numa_nodes"], case["expected_sockets"])
        elif name == "TestCPUAccumulatorFreeCores":
            assert acc.free_cores() == case["expected"]
        elif name == "TestCPUAccumulatorFreeCPUs":
            assert acc.free_cpus() == case["expected"]
        elif name == "TestCPUAccumulatorTake":
            for cpus in case["take"]:
                acc.take(cpus)
            assert (acc.is_satisfied(), acc.is_failed()) == (case["expect_satisfied"], case["expect_failed"])
            assert acc.num_cpus_needed == case["num_cpus"] - sum(len(c) for c in case["take"])
        else:
            pytest.fail(f"no runner for accumulator test {name}")
        return
    expected = set(case.get("expected", case.get("expected_result", [])))
    expected_error = case.get("expected_error", case.get("exp_err", "")) or ""
    try:
        if name == "TestTakeByTopologyNUMAPacked":
            result, error = take_by_topology_numa_packed(topo, case["available"], case["num_cpus"]), ""
        elif name == "TestTakeByTopologyNUMADistributed":
            group = case.get("cpu_group_size", case.get("cpuGroupSize", 1))
            result, error = take_by_topology_numa_distributed(topo, case["available"], case["num_cpus"], group), ""
        else:
            pytest.fail(f"no runner for cpu assignment test {name}")
    except CPUAllocationError as exc:
        result, error = frozenset(), str(exc)
    assert (set(result), error) == (expected, expected_error)


def _cpu_state(case: dict) -> CPUState:
    assignments = {pod: {c: frozenset(cpus) for c, cpus in containers.items()}
                   for pod, containers in case.get("assignments", {}).items()}
    return CPUState(frozenset(case.get("default_cpu_set", [])), assignments)


def _static_policy(case: dict, topo: CPUTopology | None = None) -> StaticPolicy:
    hint_data = case.get("topology_hint")
    affinity = (lambda p, c: TopologyHint.from_json(hint_data)) if hint_data else (lambda p, c: TopologyHint(None, False))
    return StaticPolicy(topo or TOPOLOGIES[case["topology"]], case.get("num_reserved_cpus", 0),
                        frozenset(case.get("reserved_cpus") or []), affinity, case.get("options") or {},
                        alpha_options_enabled=True)


# kubelet's unit tests build Pod objects directly, without the API server's validation: validate=False
def run_static_policy(name: str, case: dict) -> None:
    if name == "TestSMTAlignmentErrorText":
        error = SMTAlignmentError(case["requested"], case["cpus_per_core"], case["available_physical"],
                                  case["caused_by_physical"])
        assert str(error) == case["expected"]
        return
    if name == "TestValidateStaticPolicyOptions":
        options = StaticPolicyOptions.parse(case["options"], alpha_enabled=True)
        try:
            options.validate(TOPOLOGIES[case["topology"]], case["topology_manager_policy"])
            failed = False
        except CPUManagerError:
            failed = True
        assert failed == case["expected_error"]
        return
    if name in ("TestStaticPolicyStart", "TestStaticPolicyStartWithResvList"):
        try:
            policy = _static_policy(case)
        except CPUManagerError as exc:
            assert str(exc) == case["expected_new_error"]
            return
        assert not case.get("expected_new_error")
        state = _cpu_state(case)
        try:
            policy.start(state)
        except CPUManagerError as exc:
            assert str(exc) == case["expected_error"]
            return
        assert not case["expected_error"]
        assert sorted(state.default_cpu_set) == case["expected_default_cpu_set"]
    elif name in ("TestStaticPolicyAdd", "TestStaticPolicyAddWithResvList"):
        policy, state = _static_policy(case), _cpu_state(case)
        pod = pod_from_dict(case["pod"], validate=False)
        container = next(c for c in pod.all_containers() if c.name == case["container"])
        try:
            policy.allocate(state, pod, container)
            error = ""
        except (SMTAlignmentError, CPUAllocationError) as exc:
            error = str(exc)
        assert error == case["expected_error"]
        got = state.get_cpu_set(pod.uid, container.name)
        if case["expected_alloc"]:
            assert sorted(got) == case["expected_cpus"]
            assert not got & state.default_cpu_set
        else:
            assert got is None
    elif name == "TestStaticPolicyRemove":
        policy, state = _static_policy({"topology": case["topology"]}), _cpu_state(case)
        policy.remove_container(state, case["pod_uid"], case["container"])
        assert sorted(state.default_cpu_set) == case["expected_default_cpu_set"]
        assert state.get_cpu_set(case["pod_uid"], case["container"]) is None
    elif name in ("TestStaticPolicyReuseCPUs", "TestStaticPolicyDoNotReuseCPUs"):
        policy, state = _static_policy({"topology": case["topology"]}), _cpu_state(case)
        pod = pod_from_dict(case["pod"], validate=False)
        for container in pod.all_containers():
            policy.allocate(state, pod, container)
        assert sorted(state.default_cpu_set) == case["expected_default_after_alloc"]
        if case.get("remove_container"):
            policy.remove_container(state, pod.uid, case["remove_container"])
            assert sorted(state.default_cpu_set) == case["expected_default_after_remove"]
    elif name == "TestTopologyAwareAllocateCPUs":
        policy, state = _static_policy({"topology": case["topology"]}), _cpu_state(case)
        policy.start(state)
        mask = None if case["mask"] is None else bitmask.new_bitmask(*case["mask"])
        assert sorted(policy.allocate_cpus(state, case["num_requested"], mask, frozenset())) == case["expected_cpus"]
    else:
        pytest.fail(f"no runner for static policy test {name}")


def _hint_set(hints) -> set:
    return {(None if h.mask is None else h.mask, h.preferred) for h in hints or []}


def run_topology_hints(table: dict, name: str, case: dict) -> None:
    if name == "TestPodGuaranteedCPUs":
        policy = StaticPolicy(TOPOLOGIES["topoSingleSocketHT"], 0)
        assert policy.pod_guaranteed_cpus(pod_from_dict(case["pod"], validate=False)) == case["expected"]
        return
    if name in ("TestGetTopologyHints", "TestGetPodTopologyHints"):
        topo = CPUTopology.discover(machine_from_dict(table["machine"]))
        policy = StaticPolicy(topo, 0)
    elif name == "TestGetPodTopologyHintsWithPolicyOptions":
        policy = StaticPolicy(TOPOLOGIES[case["topology"]], 0, options=case["policy_options"], alpha_options_enabled=True)
        name = "TestGetPodTopologyHints"
    else:
        pytest.fail(f"no runner for topology hints test {name}")
    state = _cpu_state(case)
    pod = pod_from_dict(case["pod"], validate=False)
    if name == "TestGetTopologyHints":
        container = next(c for c in pod.all_containers() if c.name == case["container"])
        hints = policy.get_topology_hints(state, pod, container)
    else:
        hints = policy.get_pod_topology_hints(state, pod)
    got = (hints or {}).get("cpu")
    expected = [TopologyHint.from_json(h) for h in case["expected_hints"] or []]
    assert _hint_set(got) == _hint_set(expected)


def _memory_state(data: dict | None) -> dict[int, NUMANodeState]:
    state = {}
    for node_id, node in (data or {}).items():
        tables = {r: MemoryTable(t["total"], t["systemReserved"], t["allocatable"], t["reserved"], t["free"])
                  for r, t in node["memoryMap"].items()}
        state[int(node_id)] = NUMANodeState(node["numberOfAssignments"], tables, list(node["cells"]))
    return state


def _memory_assignments(data: dict) -> dict:
    return {pod: {c: [Block(list(b["numaAffinity"]), b["type"], b["size"]) for b in blocks]
                  for c, blocks in containers.items()} for pod, containers in (data or {}).items()}


class _FixedHintProvider:
    """A hint provider answering the same hints for every container and for the Pod (mockHintProvider)."""

    def __init__(self, hints):
        self.hints = hints

    def get_topology_hints(self, pod, container):
        return self.hints

    def get_pod_topology_hints(self, pod):
        return self.hints

    def allocate(self, pod, container):
        return None


def run_topology_manager(name: str, case: dict) -> None:
    if name == "TestAdmit":
        nodes = [Node(0, 0, (), (), (10, 11)), Node(1, 0, (), (), (11, 10))]
        # the test sets status.qosClass as the API server does: from the spec
        resources = {"Guaranteed": {"limits": {"cpu": "1", "memory": "1Gi"}}, "Burstable": {"requests": {"cpu": "100m"}},
                     "BestEffort": {}}[case["qos_class"]]
        pod = pod_from_dict({"metadata": {"name": "pod", "uid": "pod"},
                             "spec": {"containers": [{"name": "container", "resources": resources}]}})
        assert qos_class(pod) == case["qos_class"]
        for scope in ("container", "pod"):
            manager = TopologyManager(Machine(0, 0, 0, nodes), case["policy"], scope)
            for hints in hints_from_json(case["providers"]):
                manager.add_hint_provider(_FixedHintProvider(hints))
            result = manager.admit(pod).result
            assert (scope, result.admit) == (scope, case["expected_admit"])
            if not result.admit:
                assert result.reason == "TopologyAffinityError"
        return
    if name not in ("TestNewManager", "TestManagerScope"):
        pytest.fail(f"no runner for topology manager test {name}")
    nodes = [Node(n["id"], 0, (), (), None if n["distances"] is None else tuple(n["distances"])) for n in case["topology"]]
    try:
        manager = TopologyManager(Machine(0, 0, 0, nodes), case["policy"], case["scope"], case["options"])
        error = ""
    except TopologyManagerError as exc:
        manager, error = None, str(exc)
    if case["expected_error"]:
        assert case["expected_error"] in error, error
        return
    assert error == ""
    if "expected_policy" in case:
        assert manager.policy.name == case["expected_policy"]
    if "expected_scope" in case:
        assert manager.scope_name == case["expected_scope"]


def _memory_hints(hints) -> dict | None:
    if hints is None:
        return None
    return {r: [(h.mask, h.preferred) for h in hs] for r, hs in hints.items()}


def run_memory_manager(name: str, case: dict) -> None:
    from labkit.numa.memorymanager import _machine_states_equal, pod_requested_resources
    if name == "Test_getPodRequestedResources":
        assert pod_requested_resources(pod_from_dict(case["pod"], validate=False)) == case["expected"]
        return
    reserved = {int(k): v for k, v in case["system_reserved"].items()}
    hint_data = case.get("topology_hint")
    affinity = (lambda p, c: TopologyHint.from_json(hint_data)) if hint_data else (lambda p, c: TopologyHint(None, False))
    try:
        policy = MemoryStaticPolicy(nodes_from_topology(case.get("machine_info") or []), reserved, affinity)
    except MemoryManagerError as exc:
        assert str(exc) == case["expected_error"]
        return
    if name == "TestStaticPolicyNew":
        assert not case["expected_error"]
        return
    state = MemoryState(_memory_state(case.get("machine_state")), _memory_assignments(case.get("assignments")))
    if "init_containers_reusable_memory" in case:
        policy.init_containers_reusable_memory = case["init_containers_reusable_memory"]
    if name == "TestStaticPolicyGetTopologyHints":
        pod = pod_from_dict(case["pod"], validate=False)
        expected = case["expected_hints"]
        expected = None if expected is None else {r: [(None if h["mask"] is None else bitmask.new_bitmask(*h["mask"]),
                                                       h["preferred"]) for h in hs] for r, hs in expected.items()}
        assert _memory_hints(policy.get_topology_hints(state, pod, pod.containers[0])) == expected
        return
    try:
        if name == "TestStaticPolicyStart":
            policy.start(state)
        elif name == "TestStaticPolicyAllocate":
            pod = pod_from_dict(case["pod"], validate=False)
            policy.allocate(state, pod, pod.containers[0])
        elif name == "TestStaticPolicyRemoveContainer":
            policy.remove_container(state, "pod1", "container1")
        elif name in ("TestStaticPolicyAllocateWithInitContainers", "TestStaticPolicyAllocateWithRestartableInitContainers"):
            pod = pod_from_dict(case["pod"], validate=False)
            for container in pod.all_containers():
                policy.allocate(state, pod, container)
        else:
            pytest.fail(f"no runner for memory manager test {name}")
        error = ""
    except MemoryManagerError as exc:
        error = str(exc)
    assert error == case["expected_error"]
    if error:
        return
    if "expected_machine_state" in case:
        assert _machine_states_equal(state.machine_state, _memory_state(case["expected_machine_state"]))
    if "expected_assignments" in case:
        expected = _memory_assignments(case["expected_assignments"])
        assert {p: {c: sorted((tuple(b.numa_affinity), b.type, b.size) for b in bl) for c, bl in cs.items()}
                for p, cs in state.assignments.items()} == \
               {p: {c: sorted((tuple(b.numa_affinity), b.type, b.size) for b in bl) for c, bl in cs.items()}
                for p, cs in expected.items()}


def run_cpu_checkpoint(case: dict, tmp_path: Path) -> None:
    configured = "none"
    if "layout" in case:
        v1 = case["layout"] == "v1"
        assert checkpoint.cpu_checkpoint_dump(case["policyName"], case["defaultCpuSet"], case["entries"], v1) == case["spew_dump"]
        assert checkpoint.cpu_checksum(case["policyName"], case["defaultCpuSet"], case["entries"], v1) == case["checksum"]
        content = json.dumps({"policyName": case["policyName"], "defaultCPUSet": case["defaultCpuSet"],
                              "entries": case["entries"], "checksum": case["checksum"]})
    else:
        content = case.get("content_raw") if "content_raw" in case else json.dumps(case["content"])
    if content:
        (tmp_path / checkpoint.CPU_MANAGER_STATE).write_text(content)
    try:
        state = checkpoint.read_cpu_checkpoint(tmp_path, configured)
        error = ""
    except checkpoint.CheckpointError as exc:
        state, error = None, str(exc)
    if "expected_error_prefix" in case:
        assert error.startswith(case["expected_error_prefix"]), error
    elif case.get("layout") == "v1" and case["entries"]:
        assert "not found in initial containers list" in error   # no running containers to migrate through
    elif case.get("description") == "Restore checkpoint with invalid policy name":
        assert 'configured policy "none" differs from state checkpoint policy "other"' in error
    elif "unparsable" in case.get("description", ""):
        assert 'strconv.Atoi: parsing' in error
    else:
        assert error == "", error
        if "layout" in case:
            assert cpuset.format_cpus(state.default_cpu_set) == cpuset.format_cpus(cpuset.parse(case["defaultCpuSet"]))
            assert {p: {c: cpuset.format_cpus(v) for c, v in cs.items()} for p, cs in state.assignments.items()} == \
                   {p: {c: cpuset.format_cpus(cpuset.parse(v)) for c, v in cs.items()} for p, cs in case["entries"].items()}
        else:
            assert state is None    # no checkpoint yet: kubelet starts from an empty state


def run_memory_checkpoint(case: dict, tmp_path: Path) -> None:
    if "checksum" in case:   # a checksum vector
        assert checkpoint.memory_checksum(case["policyName"], case["machineState"], case["entries"]) == case["checksum"]
        return
    if case["content_raw"]:
        (tmp_path / checkpoint.MEMORY_MANAGER_STATE).write_text(case["content_raw"])
    try:
        state = checkpoint.read_memory_checkpoint(tmp_path, case["policy"])
        error = ""
    except checkpoint.CheckpointError as exc:
        state, error = None, str(exc)
    if case["expected_error"]:
        assert error.startswith("could not restore state from checkpoint: " + case["expected_error"]), error
        return
    assert error == ""
    expected = case["expected_state"]
    if expected is None:
        assert state is None    # no checkpoint yet: kubelet starts from an empty state
        return
    from labkit.numa.memorymanager import _machine_states_equal
    assert _machine_states_equal(state.machine_state, _memory_state(expected["machine_state"]))
    assert {p: {c: [(b.numa_affinity, b.type, b.size) for b in bl] for c, bl in cs.items()}
            for p, cs in state.assignments.items()} == \
           {p: {c: [(b.numa_affinity, b.type, b.size) for b in bl] for c, bl in cs.items()}
            for p, cs in _memory_assignments(expected["assignments"]).items()}


def run_topologies(name: str, fixture: dict) -> None:
    topo = CPUTopology.from_table(fixture)
    assert len(topo.cpus()) == fixture["num_cpus"]
    assert {c: sorted(topo.cpus_in_cores(int(c))) for c in fixture["cores"]} == \
           {c: sorted(cpus) for c, cpus in fixture["cores"].items()}
    shipped = {table: machine for machine, table in SHIPPED_FROM_TABLE.items()}.get(name)
    if shipped:
        # the shipped machine gives kubelet the same CPUs, NUMA nodes, sockets and core groupings
        discovered = CPUTopology.discover(load_machine(shipped))
        assert (discovered.num_cpus, discovered.num_cores, discovered.num_sockets, discovered.num_numa_nodes) == \
               (fixture["num_cpus"], fixture["num_cores"], fixture["num_sockets"], fixture["num_numa_nodes"])
        for row in fixture["cpus"]:
            info = discovered.details[row["cpu"]]
            assert (info.numa, info.socket) == (row["numa"], row["socket"])
        assert sorted(sorted(discovered.cpus_in_cores(c)) for c in {i.core for i in discovered.details.values()}) == \
               sorted(sorted(cpus) for cpus in fixture["cores"].values())


# -- collection -------------------------------------------------------------------------------------

def collect():
    params = []
    for path in TABLE_FILES:
        table = json.loads(path.read_text())
        schema = table.get("schema", "")
        where = f"{path.parent.name}/{path.name}"
        if schema == "labkit/numa/topology-merge/v1":
            cases = table.get("cases") or table.get("expanded_cases") or []
            for case in cases:
                params.append(pytest.param("merge", table, case, None, id=f"{where}:{case['id']}"))
                if case["policy"] == "best-effort":
                    # TestPolicyRestrictedMerge runs the same cases: restricted embeds best-effort's merge
                    params.append(pytest.param("merge-restricted", table, case, None, id=f"{where}:restricted:{case['id']}"))
            if not cases:
                params.append(pytest.param("unknown", table, {"schema": schema}, "cases", id=f"{where}:no-cases"))
        elif schema == "labkit/numa/cpu-topologies/v1":
            for name, fixture in table["fixtures"].items():
                params.append(pytest.param("topologies", table, fixture, name, id=f"{where}:{name}"))
        elif schema == "labkit/numa/memory-checkpoint/v1":
            for i, case in enumerate(table["cases"] + table.get("checksum_vectors", [])):
                params.append(pytest.param("memory-checkpoint", table, case, None, id=f"{where}:{i}:{case['description']}"))
        elif schema == "labkit/numa/cpu-checkpoint/v1":
            for i, case in enumerate(table["cases"] + table.get("other_cases", [])):
                params.append(pytest.param("cpu-checkpoint", table, case, None, id=f"{where}:{i}:{case['description']}"))
        elif schema in RUNNERS:
            for test_name, test in table["tests"].items():
                for i, case in enumerate(case_list(test)):
                    label = case.get("description") or case.get("name") or ""
                    params.append(pytest.param(schema, table, case, test_name, id=f"{where}:{test_name}:{i}:{label}"))
        else:
            params.append(pytest.param("unknown", table, {"schema": schema}, None, id=f"{where}:unknown-schema"))
    return params


RUNNERS = {
    "labkit/numa/bitmask/v1": lambda table, name, case: run_bitmask(name, case),
    "labkit/numa/topology-hint-merger/v1": lambda table, name, case: run_hint_merger(name, case),
    "labkit/numa/cpu-assignment/v1": lambda table, name, case: run_cpu_assignment(name, case),
    "labkit/numa/cpu-static-policy/v1": lambda table, name, case: run_static_policy(name, case),
    "labkit/numa/cpu-topology-hints/v1": run_topology_hints,
    "labkit/numa/memory-manager-static/v1": lambda table, name, case: run_memory_manager(name, case),
    "labkit/numa/topology-manager/v1": lambda table, name, case: run_topology_manager(name, case),
}


def test_every_table_file_was_found():
    assert len(list(SHARED.glob("*.json"))) >= 5 and len(list(OWN.glob("*.json"))) >= 9


@pytest.mark.parametrize("kind, table, case, test_name", collect())
def test_fidelity(kind, table, case, test_name, tmp_path):
    if kind == "merge":
        run_merge(table, case)
    elif kind == "merge-restricted":
        run_merge(table, case, "restricted")
    elif kind == "topologies":
        run_topologies(test_name, case)
    elif kind == "cpu-checkpoint":
        run_cpu_checkpoint(case, tmp_path)
    elif kind == "memory-checkpoint":
        run_memory_checkpoint(case, tmp_path)
    elif kind in RUNNERS:
        RUNNERS[kind](table, test_name, case)
    else:
        pytest.fail(f"no runner for table schema {case.get('schema')!r}")
