"""`labkit numa admit | merge | take | show` withhold a prediction exercise's answer until the
student has recorded theirs.

The numa lab's prediction exercises (qos, cpu-hints, merge, static-cpus, memory) ask what kubelet
does with the lab's scenario files; the tools compute exactly that. While the lab is running, a
tool prints a result that would answer one of those exercises only once the exercise's check has
seen an answer file (`labkit check numa EXERCISE` records it): the first prediction is the
student's own. Without a running lab nothing is withheld (the tools work on any input, for
instructors and everyone else).

"Would answer" is decided by what the result depends on, not by the file it came from, so that a
copy with other names, other order or changed fields that do not matter is still the exercise:
- a Pod's QoS class depends only on its QoS signature (labkit.pods.qos_signature): while qos is
  unanswered, the class of every Pod with the signature of one of the exercise's Pods is withheld,
  and so is everything its admission shows (hints, CPUs, memory nodes: they tell Guaranteed from
  the rest); `labkit numa run` does not run such a Pod (qos_run_refusal: its cgroup's place shows
  the class);
- a Pod's admission result (hints, CPUs, NUMA nodes) depends on the machine, kubelet's policies,
  what the node holds before it (free CPUs, memory per NUMA node) and the Pod's resources: while
  cpu-hints, static-cpus or memory is unanswered, a Pod met in the same situation as one of the
  exercise's Pods is withheld, with everything admitted after it (situation_key);
- a merge depends on the providers' hints, not their order: the merge exercise's hints in any order;
  and, judged by labkit's own merge (labkit.numa.merge.Policy), any hints whose merged hint and
  admission under each of the three policies the exercise asks about are those of one of its
  containers (an inert extra provider, say: merge_outcome), whether they come from a hints file
  or from the admission of a Pod whose containers get such hints (Gate.merge: `admit`, `show -f`
  and `run` withhold that Pod while merge is unanswered);
- takeByTopology on the static-cpus exercise's machine, and anywhere a take gives the exclusive
  CPUs of one of the exercise's containers;
- while static-cpus is unanswered, any Pod whose exclusive CPUs, admitted where it is, would be
  those of one of the exercise's Pods (the same machine with an extra socket, say), or one of whose
  containers would get the exclusive CPUs of one of the exercise's containers (a one-container Pod
  on the exercise's machine getting beta/a's CPU, say), judged by labkit's own admission
  (static_outcome), whatever the situation key says;
- while memory is unanswered, any Pod that, in the memory situation of one of the exercise's Pods
  (the same machine memory, policies, memory left per NUMA node and Pod memory), is admitted or
  rejected as that Pod is and gets its memory on the same NUMA nodes, whatever CPUs it asks for
  (memory_outcome: a copy of the exercise's Pods asking for 2 CPUs each, say).
The machine counts by what the result depends on too (machine_key), not by its name or how its
file spells it: a hand-written copy of a shipped machine is that machine.

Once recorded, the first time a tool shows an exercise's outcome it keeps the answer file as it is
then, and the exercise's check grades that copy; resets keep it too (labkit.predictions: storing,
keeping and the reset rule are the same for every lab; numa records an answer when the exercise's
check has seen it, rule `checked`).
"""

from __future__ import annotations

import json
from pathlib import Path

LAB_ID = "numa"
POD_SCENARIOS = {"qos": "qos-pods.yaml", "cpu-hints": "hints-pod.yaml", "static-cpus": "static-pods.yaml",
                 "memory": "memory-pods.yaml"}
MERGE_SCENARIOS = ("merge-trainer.json", "merge-feeder.json")
# the exercises whose answer is Pods' admission results: (machine, kubelet config, Pods admitted
# before the question, the Pods asked about), as their checks build them (labs/numa/checks.py)
SITUATIONS = {"cpu-hints": ("lab-two-node", "kubelet-config.yaml", "hints-running.yaml", "hints-pod.yaml"),
              "static-cpus": ("dual-socket-ht", "kubelet-static.yaml", None, "static-pods.yaml"),
              "memory": ("lab-two-node", "kubelet-memory.yaml", None, "memory-pods.yaml")}
TAKE_MACHINE = "dual-socket-ht"     # the static-cpus exercise's machine


def _state():
    """The running numa lab's state, or None."""
    from labkit.state import LabState
    try:
        state = LabState(LAB_ID)
        return state if state.phase == "up" else None
    except Exception:       # no state directory, no permission: no lab running for this user
        return None


def _scenarios() -> Path:
    from labkit.labs import get_lab
    return get_lab(LAB_ID).directory / "scenarios"


def record(env, exercise_id: str, text: str | None = None) -> None:
    """The exercise's check saw an answer file (`text`): its tools may show the outcome from now on
    (labkit.predictions.record)."""
    from labkit import predictions
    predictions.record(env.lab.id if hasattr(env, "lab") else LAB_ID, exercise_id, text)


def keep(exercise_id: str, tool: str, state=None, situation: str | None = None) -> None:
    """A tool is showing the recorded exercise's outcome: keep the answer as it is now (the first
    time only), while the lab runs."""
    from labkit import predictions
    if (state or _state()) is not None:
        predictions.keep(LAB_ID, exercise_id, tool, situation)


def recorded(exercise_id: str, state=None) -> bool:
    """Whether the exercise's outcome may be shown: its answer is recorded, or no lab runs."""
    from labkit import predictions
    if (state or _state()) is None:
        return True
    return predictions.recorded(LAB_ID, exercise_id, predictions.CHECKED_RULE)


def message(exercise_id: str) -> str:
    from labkit import predictions
    return (f"withheld until you record your answer to exercise {exercise_id}: "
            + predictions.how_to_record(LAB_ID, exercise_id, predictions.CHECKED_RULE))


# what each exercise's answer is made of, so what a situation must share with the exercise's to
# give that answer away: the cpu hints and CPU sets come from the CPU Manager alone; admissions
# and memory NUMA nodes from the Topology Manager's merge of the CPU and Memory Managers' hints
ASPECTS = {"cpu-hints": ("cpu",), "static-cpus": ("cpu",), "memory": ("cpu", "memory")}


def situation_key(node, pod, aspects: tuple[str, ...]) -> str:
    """What the `aspects` of kubelet's admission of `pod` on `node` (labkit.numa.admission.Node,
    before admitting it) depend on: the machine; for cpu the CPU Manager's policy, the free and
    reserved CPUs and the Pod's cpu amounts; for memory the Memory Manager's policy and reserved
    memory, the Topology Manager's policy, the memory per NUMA node and the Pod's memory and
    hugepages; always the Pod's QoS class — never its names, nor amounts of the other aspects."""
    from labkit.pods import qos_class

    cfg = node.config
    names = {"cpu"} if "cpu" in aspects else set()
    prefer_closest = str(cfg.topology_manager_policy_options.get("prefer-closest-numa-nodes", "")).lower() == "true"

    def amounts(values) -> dict:
        return {name: str(q.value) for name, q in sorted(values.items())
                if name in names or ("memory" in aspects and (name == "memory" or name.startswith("hugepages-")))}
    key = {"machine": machine_key(node.machine, aspects, prefer_closest), "qos": qos_class(pod), "hints": cfg.topology_manager_policy != "none",
           "containers": [[pod.is_init_container(c.name), amounts(c.requests), amounts(c.limits)]
                          for c in pod.all_containers()],
           "pod_level": [amounts(pod.pod_requests or {}), amounts(pod.pod_limits or {})]}
    if "cpu" in aspects:
        key.update(cpu_policy=[cfg.cpu_manager_policy, cfg.cpu_manager_policy_options],
                   free_cpus=sorted(node.shared_pool()), reserved=sorted(node.reserved_cpus()))
    if "memory" in aspects:
        key.update(memory_policy=[cfg.memory_manager_policy, cfg.reserved_memory], memory=node.memory_tables(),
                   topology=[cfg.topology_manager_policy, cfg.topology_manager_scope,
                             cfg.topology_manager_policy_options])
    return json.dumps(key, sort_keys=True, default=str)


def machine_key(machine, aspects: tuple[str, ...], distances: bool = False) -> dict:
    """What of a machine kubelet's admission depends on for `aspects`, not how its file spells it:
    for cpu each core's threads with its socket and NUMA node (kubelet's topology.Discover names a
    core by its lowest thread, so cadvisor's core ids do not count); for memory each NUMA node's
    memory and hugepages; the devices; the NUMA distances only where a policy option reads them."""
    key: dict = {"nodes": sorted(n.node_id for n in machine.nodes),
                 "devices": {name: sorted([d.id, list(d.numa_nodes)] for d in devs)
                             for name, devs in sorted(machine.devices.items())}}
    if "cpu" in aspects:
        key["cores"] = sorted([n.node_id, c.socket_id, sorted(c.thread_ids)] for n in machine.nodes for c in n.cores)
    if "memory" in aspects:
        key["memory"] = sorted([n.node_id, n.memory, sorted([h.page_size_kb, h.num_pages] for h in n.hugepages)]
                               for n in machine.nodes)
    if distances:
        key["distances"] = sorted([n.node_id, list(n.distances or ())] for n in machine.nodes)
    return key


class Gate:
    """Asked Pod by Pod while a tool admits them: which unanswered exercise, if any, the Pod's
    QoS class or its admission result would answer (labkit.predictions.Gate, with numa's
    situation keys); nothing while no lab runs."""

    def __init__(self, tool: str = "labkit numa"):
        from labkit import predictions
        self.tool = tool
        self.running = _state() is not None
        self._gate = predictions.Gate(LAB_ID, (*POD_SCENARIOS, *SITUATIONS) if self.running else (), tool,
                                      self._keys, predictions.CHECKED_RULE)

    @staticmethod
    def _keys(exercise: str) -> list[str]:
        if exercise == "qos":
            from labkit.numa.pods import load_pods
            from labkit.pods import qos_signature
            return [json.dumps(qos_signature(p), default=str) for p in load_pods(_scenarios() / POD_SCENARIOS["qos"])]
        if exercise == STATIC:
            outcomes = _static_outcomes()
            return _exercise_keys(exercise) + sorted(outcomes) + sorted(_static_container_keys(outcomes))
        if exercise == MEMORY:
            return _exercise_keys(exercise) + sorted(_memory_outcomes())
        return _exercise_keys(exercise) if exercise in SITUATIONS else []

    @property
    def pending(self) -> list[str]:
        return self._gate.pending

    def qos(self, pod) -> str | None:
        """"qos" when the Pod's class would answer the qos exercise, still unanswered (when it is
        answered, the class is about to be shown: the answer is kept)."""
        if not self._gate.watching("qos"):
            return None
        from labkit.pods import qos_signature
        return self._gate.about(json.dumps(qos_signature(pod), default=str), ["qos"], situation=f"Pod {pod.name}")

    def admission(self, node, pod) -> str | None:
        """The unanswered exercise whose answer the admission of `pod` on `node` (not yet admitted)
        would give; an answered one's answer is kept, as the result is about to be shown."""
        watched = [ex for ex in SITUATIONS if self._gate.watching(ex)]
        if not watched:
            return None
        found = self._gate.about(lambda ex: situation_key(node, pod, ASPECTS[ex]), watched,
                                 situation=f"admission of Pod {pod.name}")
        if found is None and STATIC in watched:
            # another situation with the same outcome (labkit's own admission says so): the same
            # CPUs for the whole Pod, or for one of its containers those of one of the exercise's
            # (what the exercise asks of each container, as a take that gives them is withheld)
            outcome = static_outcome(node, pod)
            for key in ([outcome, *sorted(_static_container_keys({outcome}))] if outcome is not None else []):
                found = self._gate.about(key, [STATIC], situation=f"admission of Pod {pod.name}")
                if found is not None:
                    break
        if found is None and MEMORY in watched:
            # the same memory situation with the same outcome, whatever the Pod's CPUs (a copy of the
            # exercise's Pods asking for another whole number of CPUs, say): memory_outcome
            outcome = memory_outcome(node, pod)
            if outcome is not None:
                found = self._gate.about(outcome, [MEMORY], situation=f"admission of Pod {pod.name}")
        return found

    def merge(self, node, pod) -> str | None:
        """"merge" when a container of `pod`, admitted now on `node`, would be merged from hints
        that hold those of one of the merge exercise's containers, with its outcome
        (pending_for_merge, containing), while that exercise is unanswered: the admission shows its best hint and whether it is admitted, under
        the node's policy (a Pod with the trainer's resources on lab-two-node, say)."""
        if not self.running:
            return None
        for data in container_hints(node, pod):
            found = pending_for_merge(data, self.tool, containing=True)
            if found:
                return found
        return None


def answers_qos(signature: str) -> bool:
    """Whether a Pod with this QoS signature (labkit.pods.qos_signature as JSON; "" for a record made
    before signatures were kept) has the class of a Pod of exercise qos, while a lab runs."""
    return bool(signature) and _state() is not None and signature in Gate._keys("qos")


def qos_run_refusal(pods, tool: str = "labkit numa run") -> str | None:
    """Why `labkit numa run` does not run these Pods on the live node, or None. While exercise qos
    is unanswered, a Pod whose QoS class would answer it does not run: running shows the class,
    whatever the tools print. kubelet's cgroupfs layout puts a Guaranteed Pod's cgroup directly
    under kubepods and the others under kubepods/burstable or kubepods/besteffort
    (pkg/kubelet/cm/pod_container_manager_linux.go GetPodContainerName, qosContainersInfo), which
    /proc/<pid>/cgroup of its processes shows; and only a Guaranteed Pod gets exclusive CPUs (CPU
    Manager static policy) or memory hints (Memory Manager Static policy, GetTopologyHints)."""
    gate = Gate(tool)
    held = [f"{pod.namespace}/{pod.name}" for pod in pods if gate.qos(pod)]
    if not held:
        return None
    return (f"Pod {', '.join(held)}: its resources decide its QoS class as those of a Pod of exercise qos do, and "
            "running it would show that class (its processes' /proc/<pid>/cgroup: kubepods/pod<uid> for Guaranteed, "
            "kubepods/burstable/… or kubepods/besteffort/… otherwise; only a Guaranteed Pod gets exclusive CPUs or "
            "memory hints). Running it is " + message("qos"))


def _exercise_keys(exercise: str) -> list[str]:
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods

    machine, config, before, asked = SITUATIONS[exercise]
    node = Node(load_machine(machine), load_config(_scenarios() / config))
    for pod in load_pods(_scenarios() / before) if before else []:
        node.admit(pod)
    keys = []
    for pod in load_pods(_scenarios() / asked):
        keys.append(situation_key(node, pod, ASPECTS[exercise]))
        node.admit(pod)
    return keys


def merge_outcome(data: dict) -> str | None:
    """What the merge exercise asks of a hints file (numaNodes, providers, distances and
    policyOptions as `labkit numa merge` reads them): the best hint and the admission under each
    of best-effort, restricted and single-numa-node, by labkit's own merge
    (topologymanager's policy Merge: pkg/kubelet/cm/topologymanager/policy.go mergeFilteredHints,
    policy_best_effort.go, policy_restricted.go, policy_single_numa_node.go). None when the file is
    not one the merge reads."""
    from labkit.numa.merge import (POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE, NUMAInfo, Policy,
                                   hints_from_json)
    try:
        options = data.get("policyOptions") or {}
        closest = str(options.get("prefer-closest-numa-nodes", "")).lower() == "true"
        info = NUMAInfo(list(data["numaNodes"]), {int(k): v for k, v in (data.get("distances") or {}).items()})
        providers = hints_from_json(data["providers"])
        merged = [Policy(name, info, closest).merge(providers)
                  for name in (POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)]
    except Exception:       # not a hints file the merge reads: the tool says why
        return None
    return json.dumps([[m.hint.to_json(), m.admit] for m in merged], sort_keys=True)


def pending_for_merge(data: dict, tool: str = "labkit numa merge", containing: bool = False) -> str | None:
    """"merge" while `data` (a hints file) would show the outcome of one of the merge exercise's
    containers, unanswered: its hints in any order, or any hints with its merge_outcome. With
    `containing` (hints a Pod's admission produced, not a file written to be merged), only hints
    that hold every one of the container's hint lists count, the rest inert (a Pod with the
    trainer's resources); that the hints of any small Guaranteed Pod merge as one of the
    containers' do is not a copy of the exercise."""
    from collections import Counter

    state = _state()
    if state is None or not isinstance(data, dict):
        return None
    outcome = merge_outcome(data)
    for name in MERGE_SCENARIOS:
        scenario = json.loads((_scenarios() / name).read_text())
        same_hints = _canonical(data.get("providers")) == _canonical(scenario["providers"]) and \
            sorted(data.get("numaNodes") or []) == sorted(scenario["numaNodes"])
        holds = not containing or not Counter(_canonical(scenario["providers"])) - Counter(_canonical(data.get("providers")))
        if same_hints or (outcome is not None and holds and outcome == merge_outcome(scenario)):
            if not recorded("merge", state):
                return "merge"
            keep("merge", tool, state, f"the hints of {name}")
            return None
    return None


def _canonical(providers) -> list[str]:
    """Providers' hints as the merge sees them: one list of hints per resource, whatever the
    resource is called, which provider gave it, or in which order (filterProvidersHints flattens
    them; the order only breaks ties, so ignoring it withholds more, never less); a resource with
    no preference (null) adds a hint that changes no merge, so it does not count."""
    if not isinstance(providers, list):
        return []
    lists = []
    for provider in providers:
        if not isinstance(provider, dict):
            lists.append(json.dumps(provider, sort_keys=True))
            continue
        for hints in provider.values():
            if hints is None:
                continue
            if isinstance(hints, list):
                lists.append(json.dumps(sorted(json.dumps(_hint(h), sort_keys=True) for h in hints)))
            else:
                lists.append(json.dumps(hints, sort_keys=True))
    return sorted(lists)


def _hint(hint):
    if isinstance(hint, dict) and isinstance(hint.get("mask"), list):
        return {**hint, "mask": sorted(hint["mask"], key=str)}
    return hint


def pending_for_take(machine: str, tool: str = "labkit numa take", taken=None) -> str | None:
    """"static-cpus" while a take on `machine` (or, given the CPUs it `taken`, its result) would
    answer that exercise, unanswered: its machine, or a take that gives the exclusive CPUs of one
    of its containers (labkit's own admission of its Pods: _static_outcomes)."""
    state = _state()
    if state is None:
        return None
    from labkit.numa.machine import load_machine
    try:
        same = machine == TAKE_MACHINE or \
            machine_key(load_machine(machine), ("cpu",)) == machine_key(load_machine(TAKE_MACHINE), ("cpu",))
    except Exception:
        return None
    if not same and taken:
        same = any(sorted(taken) in json.loads(outcome) for outcome in _static_outcomes())
    if not same:
        return None
    if not recorded("static-cpus", state):
        return "static-cpus"
    keep("static-cpus", tool, state, f"takeByTopology on {machine}")
    return None


STATIC = "static-cpus"


def static_outcome(node, pod) -> str | None:
    """What the static-cpus exercise asks of a Pod: the exclusive CPUs of each of its containers
    (`shared` for one in the shared pool), admitted now on `node` (labkit.numa.admission.Node,
    left as it is: the admission is tried on a copy); None when it gets no exclusive CPU or is not
    admitted (nothing the exercise asks then). The static policy's Allocate:
    pkg/kubelet/cm/cpumanager/policy_static.go allocateCPUs."""
    import copy

    trial = copy.deepcopy(node)
    try:
        result = trial.admit(pod)
    except Exception:       # the tool reports what kubelet says about it; nothing to compare
        return None
    if not result.admitted:
        return None
    cpus = []
    for container in pod.all_containers():
        found, exclusive = trial.container_cpus(pod.uid, container.name)
        cpus.append(sorted(found) if exclusive else "shared")
    return json.dumps(cpus) if any(c != "shared" for c in cpus) else None


def _static_container_keys(outcomes) -> set[str]:
    """The exclusive CPUs of each container in static_outcome texts, one key per container."""
    return {json.dumps(cpus) for outcome in outcomes for cpus in json.loads(outcome) if cpus != "shared"}


def _exercise_outcomes(exercise: str, outcome) -> set[str]:
    """outcome(node, pod) of each of the exercise's Pods, admitted in order as its check builds them."""
    from labkit.numa.admission import Node
    from labkit.numa.config import load_config
    from labkit.numa.machine import load_machine
    from labkit.numa.pods import load_pods

    machine, config, before, asked = SITUATIONS[exercise]
    node = Node(load_machine(machine), load_config(_scenarios() / config))
    for pod in (load_pods(_scenarios() / before) if before else []):
        node.admit(pod)
    found = set()
    for pod in load_pods(_scenarios() / asked):
        got = outcome(node, pod)
        if got is not None:
            found.add(got)
        node.admit(pod)
    return found


def _static_outcomes() -> set[str]:
    return _exercise_outcomes(STATIC, static_outcome)


MEMORY = "memory"


def memory_outcome(node, pod) -> str | None:
    """What the memory exercise asks of a Pod admitted now on `node` (tried on a copy, which is left
    as it is): whether it is admitted and each container's memory NUMA nodes, with what the Memory
    Manager's part of that depends on apart from CPUs (situation_key with the memory aspect: the
    machine's memory, the policies, the memory each NUMA node has left, the Pod's memory). The CPU
    amounts can change the merged hint and so the memory's nodes, which is why the situation key of
    exercise memory counts them; where they do not change the outcome, a Pod that differs only in
    them gives the same answer. The Memory Manager's Allocate: pkg/kubelet/cm/memorymanager/
    policy_static.go."""
    import copy

    trial = copy.deepcopy(node)
    try:
        result = trial.admit(pod)
    except Exception:       # the tool reports what kubelet says about it; nothing to compare
        return None
    admitted = bool(result.admitted)
    nodes = [trial.container_memory_nodes(pod.uid, c.name) for c in pod.all_containers()] if admitted else None
    return json.dumps(["memory outcome", situation_key(node, pod, ("memory",)), admitted, nodes], default=str)


def _memory_outcomes() -> set[str]:
    return _exercise_outcomes(MEMORY, memory_outcome)


def container_hints(node, pod) -> list[dict]:
    """The hints kubelet's Topology Manager merges for each container of `pod` admitted now on
    `node` (tried on a copy, which is left as it is), as `labkit numa merge` reads a hints file:
    {numaNodes, distances, policyOptions, providers}."""
    import copy

    trial = copy.deepcopy(node)
    try:
        result = trial.admit(pod)
    except Exception:       # the tool reports what kubelet says about it
        return []
    machine, cfg = node.machine, node.config
    base = {"numaNodes": sorted(n.node_id for n in machine.nodes),
            "distances": {str(n.node_id): list(n.distances) for n in machine.nodes if n.distances is not None},
            "policyOptions": dict(cfg.topology_manager_policy_options)}
    out = []
    for entry in result.containers:
        if not entry.evaluated or not entry.hints:
            continue
        providers = [{resource: None if hints is None else [h.to_json() for h in hints]}
                     for resource, hints in entry.hints.items()]
        out.append({**base, "providers": providers})
    return out
