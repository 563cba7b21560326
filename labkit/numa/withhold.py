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
The machine counts by what the result depends on too (machine_key), not by its name or how its
file spells it: a hand-written copy of a shipped machine is that machine.

Once recorded, the first time a tool shows an exercise's outcome it keeps the answer file as it is
then (<lab dir>/predictions/<exercise>.yaml, `keep`), and the exercise's check grades that copy: a
prediction rewritten after its outcome was shown is a copy of the outcome, not a prediction.
`labkit reset numa EXERCISE` forgets the kept copy and the recorded answer (`forget`): the tools
withhold the outcome again until a new answer is checked.
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


def record(env, exercise_id: str, text: str | None = None) -> None:
    """The exercise's check saw an answer file (`text`): its tools may show the outcome from now on.
    The text is kept aside as checked, so that an answer file removed before a tool shows the
    outcome still leaves the checked one to grade (`keep`)."""
    path = Path(env.dir) / MARKER
    try:
        done = json.loads(path.read_text())
    except (OSError, ValueError):
        done = []
    if exercise_id not in done:
        path.write_text(json.dumps(sorted(set(done) | {exercise_id})))
    if text is not None and kept(Path(env.dir), exercise_id) is None:
        checked = _predictions(Path(env.dir)) / f"{exercise_id}.checked.yaml"
        checked.parent.mkdir(parents=True, exist_ok=True)
        checked.write_text(text)


PREDICTIONS = "predictions"


def _predictions(lab_dir: Path) -> Path:
    return Path(lab_dir) / PREDICTIONS


def kept_path(lab_dir: Path, exercise_id: str) -> Path:
    return _predictions(lab_dir) / f"{exercise_id}.yaml"


def kept(lab_dir: Path, exercise_id: str) -> tuple[str, dict] | None:
    """(the answer as it was when a tool first showed the exercise's outcome, {tool, at}), or None."""
    path = kept_path(lab_dir, exercise_id)
    try:
        return path.read_text(), json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None


def keep(exercise_id: str, tool: str, state=None) -> None:
    """A tool is showing the recorded exercise's outcome: keep the answer as it is now (the first
    time only), or the one its check saw when the answer file is gone."""
    import time

    from labkit.exercises import answer_path

    state = state or _state()
    if state is None or kept(state.dir, exercise_id) is not None:
        return
    checked = _predictions(state.dir) / f"{exercise_id}.checked.yaml"
    try:
        text = answer_path(LAB_ID, exercise_id).read_text()
    except (OSError, UnicodeDecodeError):
        try:
            text = checked.read_text()
        except OSError:
            return
    path = kept_path(state.dir, exercise_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps({"tool": tool, "at": round(time.time(), 3)}))
    path.write_text(text)


def forget(env, exercise_id: str) -> None:
    """A reset of the exercise: it is unanswered again, so the tools withhold its outcome until the
    check has seen a new answer, and that answer is graded afresh."""
    for path in (kept_path(env.dir, exercise_id), kept_path(env.dir, exercise_id).with_suffix(".json"),
                 _predictions(env.dir) / f"{exercise_id}.checked.yaml"):
        path.unlink(missing_ok=True)
    marker = Path(env.dir) / MARKER
    try:
        done = json.loads(marker.read_text())
    except (OSError, ValueError):
        return
    if exercise_id in done:
        marker.write_text(json.dumps(sorted(set(done) - {exercise_id})))


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
    QoS class or its admission result would answer."""

    def __init__(self, tool: str = "labkit numa"):
        state = _state()
        self.state, self.tool = state, tool
        self.pending = [] if state is None else \
            [ex for ex in (*POD_SCENARIOS, *SITUATIONS) if not recorded(ex, state)]
        # recorded exercises whose outcome no tool has shown yet: the first showing keeps the answer
        self.unkept = [] if state is None else \
            [ex for ex in (*POD_SCENARIOS, *SITUATIONS) if ex not in self.pending and kept(state.dir, ex) is None]
        self._signatures: dict | None = None
        self._situations: dict | None = None

    def _shown(self, exercise: str) -> None:
        if exercise in self.unkept:
            keep(exercise, self.tool, self.state)
            self.unkept.remove(exercise)

    def qos(self, pod) -> str | None:
        """"qos" when the Pod's class would answer the qos exercise, still unanswered (when it is
        answered, the class is about to be shown: the answer is kept)."""
        if "qos" not in self.pending and "qos" not in self.unkept:
            return None
        from labkit.numa.pods import load_pods
        from labkit.pods import qos_signature
        if self._signatures is None:
            self._signatures = {qos_signature(p) for p in load_pods(_scenarios() / POD_SCENARIOS["qos"])}
        if qos_signature(pod) not in self._signatures:
            return None
        if "qos" in self.pending:
            return "qos"
        self._shown("qos")
        return None

    def admission(self, node, pod) -> str | None:
        """The unanswered exercise whose answer the admission of `pod` on `node` (not yet admitted)
        would give; an answered one's answer is kept, as the result is about to be shown."""
        watched = [ex for ex in (*self.pending, *self.unkept) if ex in SITUATIONS]
        if not watched:
            return None
        if self._situations is None:
            self._situations = {ex: set(_exercise_keys(ex)) for ex in watched}
        found = [ex for ex, keys in self._situations.items()
                 if (ex in self.pending or ex in self.unkept) and situation_key(node, pod, ASPECTS[ex]) in keys]
        for ex in found:
            if ex not in self.pending:
                self._shown(ex)
        return next((ex for ex in found if ex in self.pending), None)


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


def pending_for_merge(data: dict, tool: str = "labkit numa merge") -> str | None:
    state = _state()
    if state is None or not isinstance(data, dict):
        return None
    for name in MERGE_SCENARIOS:
        scenario = json.loads((_scenarios() / name).read_text())
        if _canonical(data.get("providers")) == _canonical(scenario["providers"]) and \
                sorted(data.get("numaNodes") or []) == sorted(scenario["numaNodes"]):
            if not recorded("merge", state):
                return "merge"
            keep("merge", tool, state)
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


def pending_for_take(machine: str, tool: str = "labkit numa take") -> str | None:
    state = _state()
    if state is None:
        return None
    from labkit.numa.machine import load_machine
    try:
        same = machine == TAKE_MACHINE or \
            machine_key(load_machine(machine), ("cpu",)) == machine_key(load_machine(TAKE_MACHINE), ("cpu",))
    except Exception:
        return None
    if not same:
        return None
    if not recorded("static-cpus", state):
        return "static-cpus"
    keep("static-cpus", tool, state)
    return None
