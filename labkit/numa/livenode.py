"""The live node: kubelet's resource managers on this host, with real Pods pinned by cpuset cgroups.

A live node lives in a lab's state directory (the `numa` lab builds one):
  machine.json         this host's MachineInfo (labkit.numa.discover), taken when the lab was built
  kubelet-config.yaml  the node's KubeletConfiguration
  kubelet/             kubelet's root dir: cpu_manager_state, memory_manager_state
  pods/<uid>.json      the Pods running on the node (what the API server would list as bound here)

Running a Pod does what kubelet does with one, in order:
1. removeStaleState (cpu_manager.go / memory_manager.go): checkpoint entries of Pods that are no
   longer on the node are dropped;
2. admission (labkit.numa.admission.Node: Topology Manager, CPU / Memory / Device Managers) with
   the checkpoints restored from kubelet/ and written back;
3. the containers are created by the runtime (labkit.numa.runtime) with cpuset.cpus = the
   container's exclusive CPUs or the shared pool, cpuset.mems = its Memory Manager NUMA nodes
   (internal_container_lifecycle_linux.go PreCreateContainer); regular init containers run to
   completion first, as kubelet runs them;
4. the CPU Manager's reconcileState (cpu_manager.go): every running container's cpuset.cpus is
   set to its exclusive CPUs or the current shared pool, where it differs from what is there.
   kubelet runs this loop every cpuManagerReconcilePeriod (10 s); labkit runs it right after
   every change, so what you see has already converged.

Deleting a Pod stops its containers, removes its cgroups, releases its CPUs and memory
(RemoveContainer) and reconciles, so the shared pool grows back.

Crash points (`labkit.crashpoints`, LABKIT_CRASH_AT=numa:<step>) let the crash-and-cleanup tests
stop `labkit numa run` and `labkit run numa` at every step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from labkit import cgroups
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError
from labkit.numa import runtime
from labkit.numa.cpuset import format_cpus

MACHINE_FILE = "machine.json"
CONFIG_FILE = "kubelet-config.yaml"
KUBELET_DIR = "kubelet"
PODS_DIR = "pods"


@dataclass
class ContainerRecord:
    name: str
    init: bool
    sidecar: bool
    command: list[str]
    cgroup: str = ""
    container_id: str = ""


@dataclass
class PodRecord:
    name: str
    namespace: str
    uid: str
    qos: str
    containers: list[ContainerRecord]
    qos_answers_exercise: bool = False     # its class would answer exercise qos (labkit.numa.withhold)
    qos_signature: str = ""                # labkit.pods.qos_signature, as JSON: judged when shown (withhold.answers_qos)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def shown_qos(self) -> str:
        """The class as the tools show it: withheld while it would answer an unanswered exercise."""
        from labkit.numa import withhold
        # judged when shown, not only when it was run: the node agent the lab starts, and a Pod run
        # while qos was answered, answer it again once its prediction is forgotten
        if not (self.qos_answers_exercise or withhold.answers_qos(self.qos_signature)):
            return self.qos
        if not withhold.recorded("qos"):
            return "withheld"
        withhold.keep("qos", "labkit numa show")       # shown now: the answer as it is is the one graded
        return self.qos

    def to_json(self) -> dict:
        return {"name": self.name, "namespace": self.namespace, "uid": self.uid, "qos": self.qos,
                "containers": [c.__dict__ for c in self.containers], "qos_answers_exercise": self.qos_answers_exercise,
                "qos_signature": self.qos_signature}

    @classmethod
    def from_json(cls, data: dict) -> "PodRecord":
        return cls(data["name"], data["namespace"], data["uid"], data["qos"],
                   [ContainerRecord(**c) for c in data["containers"]], bool(data.get("qos_answers_exercise")),
                   str(data.get("qos_signature") or ""))


@dataclass
class ContainerView:
    """One container as the kernel sees it, next to what kubelet wants for it."""
    pod: PodRecord
    container: ContainerRecord
    pids: list[int]
    want_cpus: frozenset[int]
    exclusive: bool
    want_mems: list[int] | None
    cgroup_cpus: list[int] | None = None
    proc: runtime.Affinity | None = None

    @property
    def label(self) -> str:
        return f"{self.pod.key}/{self.container.name}"

    @property
    def state(self) -> str:
        if self.pids:
            return "running"
        return "completed" if self.container.init and not self.container.sidecar else "not running"


@dataclass
class RunResult:
    pod: PodRecord
    admitted: bool
    reason: str = ""
    message: str = ""
    started: list[ContainerView] = field(default_factory=list)
    init_exit_codes: dict[str, int] = field(default_factory=dict)
    reconciled: list[tuple[str, str]] = field(default_factory=list)   # (container, new cpuset.cpus)
    admission: object = None   # labkit.numa.admission.PodResult: hints and best hint per container


def _pod_documents(path: Path) -> list[dict]:
    """The Pod objects of a YAML file, in the order labkit.numa.pods.load_pods reads them."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    out: list[dict] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out += list(doc.get("items") or [])
        else:
            out.append(doc)
    return out


class LiveNode:
    def __init__(self, env):
        self.env = env
        self.dir = Path(env.dir)
        self.machine_path = self.dir / MACHINE_FILE
        self.config_path = self.dir / CONFIG_FILE
        self.kubelet_dir = self.dir / KUBELET_DIR
        self.pods_dir = self.dir / PODS_DIR

    # -- building ------------------------------------------------------------------------------------
    def create(self, machine: dict, config_text: str) -> None:
        """Write the node's files (each recorded in the ledger first) and its kubepods cgroups."""
        for path in (self.machine_path, self.config_path, self.kubelet_dir, self.pods_dir):
            self.env.ledger.record("path", path=str(path))
        self.machine_path.write_text(json.dumps(machine, indent=2) + "\n")
        self.config_path.write_text(config_text)
        self.kubelet_dir.mkdir(exist_ok=True)
        self.pods_dir.mkdir(exist_ok=True)
        for qos in ("Guaranteed", "Burstable", "BestEffort"):
            cgroups.create(self.env, runtime.qos_parent(qos))
        self.kubelet().save()   # kubelet's first start: fresh checkpoints (and early failure on a bad config)

    def exists(self) -> bool:
        return self.machine_path.exists() and self.config_path.exists() and self.pods_dir.is_dir()

    # -- kubelet's view ------------------------------------------------------------------------------
    def machine(self):
        from labkit.numa.machine import load_machine
        return load_machine(self.machine_path)

    def kubelet(self):
        """The resource managers, restored from the checkpoints (KubeletStartError when kubelet would not start)."""
        from labkit.numa.admission import Node
        from labkit.numa.config import load_config
        return Node(self.machine(), load_config(self.config_path), self.kubelet_dir)

    def records(self) -> list[PodRecord]:
        if not self.pods_dir.is_dir():
            return []
        out = []
        for path in sorted(self.pods_dir.glob("*.json")):
            try:
                out.append(PodRecord.from_json(json.loads(path.read_text())))
            except (ValueError, KeyError, TypeError):
                continue   # a record cut short by a crash: the Pod never started
        return out

    def record(self, name: str, namespace: str = "default") -> PodRecord | None:
        for rec in self.records():
            if rec.name == name and rec.namespace == namespace:
                return rec
        return None

    # -- running and deleting Pods -------------------------------------------------------------------
    def run(self, path: Path) -> list[RunResult]:
        from labkit.numa.pods import load_pods

        path = Path(path)
        pods = load_pods(path)
        documents = _pod_documents(path)
        running = {rec.key for rec in self.records()}
        from labkit.numa import withhold
        self._gate = withhold.Gate("labkit numa run")
        plans = []
        for index, (pod, doc) in enumerate(zip(pods, documents)):
            where = f"items[{index}]" if len(pods) > 1 else ""
            if f"{pod.namespace}/{pod.name}" in running:
                raise LabkitError(f"Pod {pod.namespace}/{pod.name} is already on the node: "
                                  f"`labkit numa delete {pod.name}` first")
            plans.append((pod, self._container_records(pod, doc, path, where)))
        results = []
        for pod, containers in plans:
            results.append(self._run_one(pod, containers))
        return results

    def _refuse_an_exercise_situation(self, node, pod) -> None:
        from labkit.numa import withhold
        gate = getattr(self, "_gate", None) or withhold.Gate("labkit numa run")
        exercise = gate.admission(node, pod) or gate.merge(node, pod)
        if exercise:
            raise LabkitError(f"Pod {pod.namespace}/{pod.name} meets the situation of exercise {exercise} on this node: "
                              f"running it is {withhold.message(exercise)}")

    def _container_records(self, pod, doc: dict, path: Path, where: str) -> list[ContainerRecord]:
        spec = doc.get("spec") or {}
        out = []
        for kind, items in (("initContainers", spec.get("initContainers") or []), ("containers", spec.get("containers") or [])):
            for i, item in enumerate(items):
                argv = runtime.container_command(item, init=kind == "initContainers" and item.get("restartPolicy") != "Always")
                field_name = f"{where + '.' if where else ''}spec.{kind}[{i}].command"
                runtime.check_command(argv, field_name, path)
                out.append(ContainerRecord(item["name"], kind == "initContainers",
                                           item.get("restartPolicy") == "Always", argv))
        return out

    def _run_one(self, pod, containers: list[ContainerRecord]) -> RunResult:
        from labkit.numa.pods import qos_class

        gate = getattr(self, "_gate", None)
        from labkit.pods import qos_signature

        record = PodRecord(pod.name, pod.namespace, pod.uid, qos_class(pod), containers,
                           bool(gate and gate.qos(pod)), json.dumps(qos_signature(pod), default=str))
        node = self.kubelet()
        node.remove_stale_state({rec.uid for rec in self.records()} | {pod.uid})
        (admission,) = node.admit_all([pod], before=self._refuse_an_exercise_situation)
        node.save()
        crash_point("numa:admitted")
        if not admission.admitted:
            return RunResult(record, False, admission.result.reason, admission.result.message, admission=admission)
        for container in containers:
            container.container_id = runtime.new_container_id()
            container.cgroup = str(runtime.lab_cgroup_root(self.env) / runtime.container_cgroup_relpath(
                record.qos, pod.uid, container.container_id))
        self._write_record(record)
        crash_point("numa:recorded")
        result = RunResult(record, True, admission=admission)
        for container in containers:
            node.add_container(pod, container.name)    # AddContainer: memory of finished init containers goes
            node.save()
            cpus, _exclusive = node.container_cpus(pod.uid, container.name)
            mems = node.container_memory_nodes(pod.uid, container.name)
            if container.init and not container.sidecar:
                result.init_exit_codes[container.name] = runtime.run_to_completion(
                    self.env, record.qos, pod.uid, container.name, container.container_id, container.command, cpus, mems)
                continue
            group, proc = runtime.start(self.env, record.qos, pod.uid, container.name, container.container_id,
                                        container.command, cpus, mems)
            runtime.wait_joined(group, proc.pid)
            crash_point("numa:container-started")
        result.reconciled = [(label, cpus) for label, cpus in self.reconcile(node)
                             if not label.startswith(record.key + "/")]
        crash_point("numa:reconciled")
        result.started = [v for v in self.views(node) if v.pod.uid == pod.uid]
        return result

    def _write_record(self, record: PodRecord) -> None:
        path = self.pods_dir / f"{record.uid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n")
        os.replace(tmp, path)

    def delete(self, name: str, namespace: str = "default") -> PodRecord:
        record = self.record(name, namespace)
        if record is None:
            known = ", ".join(r.key for r in self.records()) or "none"
            raise LabkitError(f"no Pod {namespace}/{name} on the node (Pods: {known})")
        for container in record.containers:
            runtime.stop(self.env, record.uid, container.name)
        pod_group = runtime.lab_cgroup_root(self.env) / runtime.qos_parent(record.qos) / f"pod{record.uid}"
        runtime.remove_cgroup(pod_group)
        (self.pods_dir / f"{record.uid}.json").unlink(missing_ok=True)
        node = self.kubelet()
        node.remove_stale_state({rec.uid for rec in self.records()})
        node.save()
        self.reconcile(node)
        return record

    # -- reconcile and observe -----------------------------------------------------------------------
    def views(self, node=None) -> list[ContainerView]:
        node = node or self.kubelet()
        out = []
        for rec in self.records():
            for container in rec.containers:
                cpus, exclusive = node.container_cpus(rec.uid, container.name)
                view = ContainerView(rec, container, runtime.running_pids(self.env, rec.uid, container.name),
                                     cpus, exclusive, node.container_memory_nodes(rec.uid, container.name))
                if container.cgroup and Path(container.cgroup).is_dir():
                    view.cgroup_cpus = runtime.cgroup_cpuset(Path(container.cgroup)).cpus
                if view.pids:
                    view.proc = runtime.proc_affinity(min(view.pids))
                out.append(view)
        return out

    def reconcile(self, node=None) -> list[tuple[str, str]]:
        """reconcileState: put every running container on its exclusive CPUs or the shared pool."""
        node = node or self.kubelet()
        changed = []
        for view in self.views(node):
            if not view.pids or view.cgroup_cpus is None:
                continue
            if set(view.cgroup_cpus) != set(view.want_cpus):
                runtime.set_cpuset(Path(view.container.cgroup), view.want_cpus)
                changed.append((view.label, format_cpus(view.want_cpus)))
        return changed

    def placement(self, node=None):
        """Who runs where, for labkit.numa.diagram."""
        from labkit.numa.diagram import Placement

        node = node or self.kubelet()
        placement = Placement(reserved=sorted(node.reserved_cpus()), shared_pool=sorted(node.shared_pool()),
                              memory_tables=node.memory_tables())
        for view in self.views(node):
            if view.container.init and not view.container.sidecar and not view.pids and not view.exclusive:
                continue
            if view.exclusive:
                placement.exclusive[view.label] = sorted(view.want_cpus)
            elif view.pids:
                placement.shared.append(view.label)
            if view.want_mems is not None:
                placement.memory[view.label] = list(view.want_mems)
        return placement

