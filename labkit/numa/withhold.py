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
  unanswered, the class of every Pod with the signature of one of the exercise's Pods is withheld;
- a Pod's admission result (hints, CPUs, NUMA nodes) depends on the machine, kubelet's policies,
  what the node holds before it (free CPUs, memory per NUMA node) and the Pod's resources: while
  cpu-hints, static-cpus or memory is unanswered, a Pod met in the same situation as one of the
  exercise's Pods is withheld, with everything admitted after it (situation_key);
- a merge depends on the providers' hints, not their order: the merge exercise's hints in any order;
- takeByTopology on the static-cpus exercise's machine.
(A student is root on their machine and could read labkit's files; this keeps tools from
answering, it is not a security boundary.)
"""

from __future__ import annotations

import json
from pathlib import Path

LAB_ID = "numa"
MARKER = "answered.json"
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


def record(env, exercise_id: str) -> None:
    """The exercise's check saw an answer file: its tools may show the outcome from now on."""
    path = Path(env.dir) / MARKER
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError):
        done = []
    if exercise_id not in done:
        path.write_text(json.dumps(sorted(set(done) | {exercise_id})))


def recorded(exercise_id: str, state=None) -> bool:
    state = state or _state()
    if state is None:
        return True
    try:
        return exercise_id in json.loads((state.dir / MARKER).read_text())
    except (OSError, ValueError):
        return False


def message(exercise_id: str) -> str:
    from labkit.exercises import answer_path
    return (f"withheld until you record your answer to exercise {exercise_id}: write it to "
            f"{answer_path(LAB_ID, exercise_id)} and run `labkit check {LAB_ID} {exercise_id}`")


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

    def amounts(values) -> dict:
        return {name: str(q.value) for name, q in sorted(values.items())
                if name in names or ("memory" in aspects and (name == "memory" or name.startswith("hugepages-")))}
    key = {"machine": node.machine.to_dict(), "qos": qos_class(pod), "hints": cfg.topology_manager_policy != "none",
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


class Gate:
    """Asked Pod by Pod while a tool admits them: which unanswered exercise, if any, the Pod's
    QoS class or its admission result would answer."""

    def __init__(self):
        state = _state()
        self.pending = [] if state is None else \
            [ex for ex in (*POD_SCENARIOS, *SITUATIONS) if not recorded(ex, state)]
        self._signatures: dict | None = None
        self._situations: dict | None = None

    def qos(self, pod) -> str | None:
        """"qos" when the Pod's class would answer the qos exercise."""
        if "qos" not in self.pending:
            return None
        from labkit.numa.pods import load_pods
        from labkit.pods import qos_signature
        if self._signatures is None:
            self._signatures = {qos_signature(p) for p in load_pods(_scenarios() / POD_SCENARIOS["qos"])}
        return "qos" if qos_signature(pod) in self._signatures else None

    def admission(self, node, pod) -> str | None:
        """The exercise whose answer the admission of `pod` on `node` (not yet admitted) would give."""
        if not any(ex in SITUATIONS for ex in self.pending):
            return None
        if self._situations is None:
            self._situations = {ex: set(_exercise_keys(ex)) for ex in self.pending if ex in SITUATIONS}
        return next((ex for ex, keys in self._situations.items() if situation_key(node, pod, ASPECTS[ex]) in keys),
                    None)


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


def pending_for_merge(data: dict) -> str | None:
    state = _state()
    if state is None or recorded("merge", state):
        return None
    for name in MERGE_SCENARIOS:
        scenario = json.loads((_scenarios() / name).read_text())
        if _canonical(data.get("providers")) == _canonical(scenario["providers"]) and \
                sorted(data.get("numaNodes") or []) == sorted(scenario["numaNodes"]):
            return "merge"
    return None


def _canonical(providers) -> list[str]:
    """Providers' hints as a multiset: the merge does not depend on their order."""
    return sorted(json.dumps(p, sort_keys=True) for p in providers) if isinstance(providers, list) else []


def pending_for_take(machine: str) -> str | None:
    state = _state()
    if state is None or recorded("static-cpus", state):
        return None
    from labkit.numa.machine import load_machine
    try:
        same = machine == TAKE_MACHINE or load_machine(machine).to_dict() == load_machine(TAKE_MACHINE).to_dict()
    except Exception:
        return None
    return "static-cpus" if same else None
