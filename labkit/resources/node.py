"""A live node: kubelet's cgroup tree for Pods, on real cgroups, with real processes.

Each node of a lab has its own tree under the lab's cgroup subtree (labkit.resources.cgroupfs),
laid out as kubelet's cgroupfs driver lays it out (qos_container_manager_linux.go,
pod_container_manager_linux.go):

  <node>/kubepods/                        node allocatable: capacity - reserved (memory limit, shares)
  <node>/kubepods/pod<uid>/<container>    Guaranteed Pods
  <node>/kubepods/burstable/pod<uid>/...  Burstable Pods   (shares: their summed cpu requests)
  <node>/kubepods/besteffort/pod<uid>/... BestEffort Pods  (shares: 2)

A node's memory capacity is a budget the lab owns, not the machine's: kubepods is capped at it,
so memory pressure and OOM kills stay inside the lab. Its CPUs are the machine's.

Running a Pod does what kubelet and the runtime do: admission (the Pod's requests must fit the
node's allocatable, lifecycle/predicate.go), the pod cgroup (ResourceConfigForPod), the QoS
cgroup's shares, then each container's cgroup (calculateLinuxResources; on v2 also
memory.oom.group=1, kubelet's default singleProcessOOMKill=false) and its process, which joins
its cgroups and sets its oom_score_adj before it executes the container's command, as runc does.
Init containers start in declaration order: a regular one runs to completion before the next
starts, a sidecar (restartPolicy: Always) keeps running (kuberuntime computeInitContainerActions). labkit's runtime does not restart containers:
a container the kernel killed stays terminated (kubelet would restart it, restartPolicy Always,
and back off: CrashLoopBackOff); apply the Pod again after a fix.

State: <lab dir>/nodes/<node>/pods/<pod>.json — the stored Pod (defaulted), its status and, per
container, its cgroup and process tag.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from labkit import procs
from labkit.apiserver.podvalidation import POD_UPDATE_FORBIDDEN
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError
from labkit.quantity import BINARY, Quantity
from labkit.resources import kubelet
from labkit.resources.cgroupfs import LabCgroups
from labkit.pods import (BEST_EFFORT, BURSTABLE, GUARANTEED, Pod, PodInvalid, load_pods, pod_from_dict,
                                   pod_requests, qos_class)

WORKLOAD = Path(__file__).resolve().parent / "workload.py"
# Joins the cgroups given as $3.. ($2 of them), sets oom_score_adj $1, then becomes the command.
# A kernel that refuses a negative oom_score_adj (no CAP_SYS_RESOURCE, as in some sandboxes) is
# reported in the container's log; the container runs with the value it has.
_ENTER = ('adj=$1; n=$2; shift 2; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 126; '
          'shift; n=$((n-1)); done; echo "$adj" 2>/dev/null > /proc/self/oom_score_adj || '
          'echo "labkit: this kernel refused oom_score_adj $adj (CAP_SYS_RESOURCE?)" >&2; exec "$@"')
QOS_DIR = {GUARANTEED: "kubepods", BURSTABLE: "kubepods/burstable", BEST_EFFORT: "kubepods/besteffort"}


@dataclass
class NodeConfig:
    """One node's kubelet configuration, as much of it as the lab uses (KubeletConfiguration)."""
    name: str
    memory_capacity: int                  # bytes: the lab's budget for this node
    cpu_capacity_milli: int               # the machine's CPUs
    eviction_hard: dict = field(default_factory=lambda: {"memory.available": "100Mi"})
    eviction_minimum_reclaim: dict = field(default_factory=dict)
    priority_classes: dict = field(default_factory=dict)

    def eviction_hard_bytes(self, signal: str = "memory.available") -> int:
        value = self.eviction_hard.get(signal, "0")
        if value.endswith("%"):
            return int(self.memory_capacity * float(value[:-1]) / 100)
        return Quantity.parse(value).value_int()

    @property
    def allocatable_memory(self) -> int:
        """node.status.allocatable: capacity - reserved (none on a lab node) - the hard eviction threshold."""
        return self.memory_capacity - self.eviction_hard_bytes()

    def to_json(self) -> dict:
        return dict(self.__dict__)


def container_argv(command: list[str]) -> list[str]:
    """A container's command as a host command; `workload` is labkit's workload program."""
    argv = list(command) or ["sleep", "infinity"]
    if argv[0] == "workload":
        return [sys.executable, "-S", "-I", str(WORKLOAD), *argv[1:]]
    return argv


def _check_command(pod: Pod) -> None:
    import shutil
    for c in pod.all_containers():
        argv = container_argv(c.command)
        if shutil.which(argv[0]) is None:
            raise LabkitError(f"Pod {pod.name}, container {c.name}: {argv[0]!r} is not a command on this host "
                              "(containers run host commands or `workload ...`; images are not pulled)")


@dataclass
class ContainerView:
    name: str
    init: bool
    cgroup: str                 # relative to the lab's cgroup root
    pids: list[int]
    state: str                  # running | terminated | completed | waiting
    reason: str = ""            # OOMKilled | Error | Completed | Evicted
    exit_code: int | None = None
    oom_score_adj: int | None = None   # read from /proc


class Node:
    def __init__(self, env, config: NodeConfig):
        self.env = env
        self.config = config
        self.name = config.name
        self.dir = Path(env.dir) / "nodes" / self.name
        self.pods_dir = self.dir / "pods"
        self._cgroups = None
        self._pending: list[tuple[subprocess.Popen, str]] = []   # started, not yet seen in their cgroup

    @property
    def cgroups(self) -> LabCgroups:
        if self._cgroups is None:
            self._cgroups = LabCgroups(self.env)
        return self._cgroups

    def rel(self, *parts: str) -> str:
        return "/".join([self.name, *parts])

    # -- building --------------------------------------------------------------------------------

    def create(self) -> None:
        """The node's state directory and kubelet's top cgroups: kubepods, burstable, besteffort."""
        self.pods_dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "node.json").write_text(json.dumps(self.config.to_json(), indent=2) + "\n")
        for qos in (GUARANTEED, BURSTABLE, BEST_EFFORT):
            self.cgroups.create(self.rel(QOS_DIR[qos]))
        # node_container_manager_linux.go: kubepods is capped at capacity - system/kube reserved
        # (a lab node reserves nothing); the eviction threshold is not subtracted there
        self.cgroups.apply(self.rel("kubepods"), kubelet.CgroupSettings(
            kubelet.milli_cpu_to_shares(self.config.cpu_capacity_milli), memory_limit=self.config.memory_capacity))
        self.cgroups.apply(self.rel(QOS_DIR[BEST_EFFORT]), kubelet.CgroupSettings(kubelet.MIN_SHARES))
        self._update_burstable()

    def exists(self) -> bool:
        return self.pods_dir.is_dir() and self.cgroups.exists(self.rel("kubepods"))

    # -- Pods ------------------------------------------------------------------------------------

    def records(self) -> list[dict]:
        out = []
        if not self.pods_dir.is_dir():
            return out
        for path in sorted(self.pods_dir.glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except ValueError:
                continue     # cut short by a crash before the Pod started
        return out

    def record(self, name: str) -> dict | None:
        path = self.pods_dir / f"{name}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def pod(self, record: dict) -> Pod:
        return pod_from_dict(record["manifest"], f"{self.name}/{record['name']}",
                             priority_classes=self.config.priority_classes)

    def allocated_pod(self, record: dict) -> Pod:
        """The Pod as kubelet accounts for it: with the resources it was admitted or last resized
        at (allocation_manager.go UpdatePodFromAllocation), which differ from its spec while a
        resize is pending (labkit.resources.resize)."""
        allocated = record.get("allocated")
        if not allocated:
            return self.pod(record)
        import copy
        manifest = copy.deepcopy(record["manifest"])
        for key in ("containers", "initContainers"):
            for c in (manifest.get("spec") or {}).get(key) or []:
                if c.get("name") in allocated:
                    c["resources"] = copy.deepcopy(allocated[c["name"]])
        return pod_from_dict(manifest, f"{self.name}/{record['name']}", priority_classes=self.config.priority_classes)

    def active(self) -> list[tuple[dict, Pod]]:
        return [(r, self.allocated_pod(r)) for r in self.records() if r["status"]["phase"] in ("Pending", "Running")]

    def _write(self, record: dict) -> None:
        path = self.pods_dir / f"{record['name']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, path)

    def load(self, path) -> list[Pod]:
        return load_pods_strict(path, self.name, self.config.priority_classes)

    def apply(self, pods: list[Pod], wait: bool = True) -> list[tuple[str, str]]:
        """Run each Pod; (pod name, what happened) for each. With wait, return once every container
        process runs in its cgroup (else call wait_started)."""
        try:
            return self._apply(pods)
        finally:
            if wait:
                self.wait_started()

    def wait_started(self) -> None:
        for proc, rel in self._pending:
            self._wait_joined(proc, rel)
        self._pending = []

    def _apply(self, pods: list[Pod]) -> list[tuple[str, str]]:
        out = []
        for pod in pods:
            if pod.node != self.name:
                raise LabkitError(f"Pod {pod.name} is for node {pod.node!r}, not {self.name!r}")
            existing = self.record(pod.name)
            if existing is not None:
                if existing["manifest"].get("spec") == pod.manifest.get("spec") and existing["status"]["phase"] == "Running":
                    out.append((pod.name, "unchanged"))
                    continue
                if existing["status"]["phase"] in ("Pending", "Running"):
                    # what kubectl apply prints when this is its only refusal (labkit.kubectlerrors:
                    # ValidatePodUpdate's error, without upstream's diff), then what to do here, on
                    # a line of its own
                    raise PodInvalid(
                        f'The Pod "{pod.name}" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}'
                        f"\nDelete it first: `labkit resources delete {pod.name}`; its containers' CPU and memory "
                        f"change in place through the resize subresource: `labkit resources patch {pod.name} "
                        "--subresource resize -p PATCH`, as `kubectl patch pod --subresource resize` on a v1.34 cluster.")
                self.delete(pod.name)    # a Pod that ended (evicted, rejected) is replaced
            _check_command(pod)
            out.append((pod.name, self._run(pod)))
        return out

    def _admit(self, pod: Pod) -> tuple[str, str] | None:
        """kubelet's admit handlers in their order (kubelet.go): the eviction manager's (no
        BestEffort Pod under MemoryPressure: labkit.resources.pressure), then GeneralPredicates'
        resource fit (lifecycle/predicate.go): requests against allocatable."""
        from labkit.resources import pressure

        rejected = pressure.admit(self.dir, pod)
        if rejected:
            return rejected
        unfit = self.resource_fit(pod)
        if unfit:     # kubelet's rejectPod writes the handler's message after "Pod was rejected: "
            return unfit[0], f"Pod was rejected: {unfit[1]}"
        return None

    def resource_fit(self, pod: Pod, others: list[Pod] | None = None) -> tuple[str, str] | None:
        """GeneralPredicates' resource fit (lifecycle/predicate.go): (OutOf<resource>, its message)
        when the Pod's requests do not fit allocatable beside `others` (default: the node's active
        Pods, this one excepted), else None."""
        wanted = pod_requests(pod)
        used = {"cpu": 0, "memory": 0}
        if others is None:
            others = [other for record, other in self.active() if record["name"] != pod.name]
        for other in others:
            requests = pod_requests(other)
            used["cpu"] += requests["cpu"].milli_value() if "cpu" in requests else 0
            used["memory"] += requests["memory"].value_int() if "memory" in requests else 0
        capacity = {"cpu": self.config.cpu_capacity_milli, "memory": self.config.allocatable_memory}
        for resource in ("cpu", "memory"):
            if resource not in wanted:
                continue
            asked = wanted[resource].milli_value() if resource == "cpu" else wanted[resource].value_int()
            if asked > capacity[resource] - used[resource]:
                return (f"OutOf{resource}", f"Node didn't have enough resource: {resource}, "
                                            f"requested: {asked}, used: {used[resource]}, capacity: {capacity[resource]}")
        return None

    def _run(self, pod: Pod) -> str:
        qos = qos_class(pod)
        pod_rel = self.rel(QOS_DIR[qos], f"pod{pod.uid}")
        record = {"name": pod.name, "uid": pod.uid, "qos": qos, "manifest": pod.manifest, "cgroup": pod_rel,
                  "status": {"phase": "Pending"}, "containers": {}}
        rejected = self._admit(pod)
        if rejected:
            record["status"] = {"phase": "Failed", "reason": rejected[0], "message": rejected[1]}
            self._write(record)
            return f"rejected: {rejected[0]}: {rejected[1]}"
        for c in pod.all_containers():
            record["containers"][c.name] = {"cgroup": f"{pod_rel}/{c.name}", "tag": f"{self.name}/{pod.name}/{c.name}",
                                            "init": c.init, "oom_score_adj": kubelet.oom_score_adj(
                                                pod, c, self.config.memory_capacity)}
        self._write(record)
        crash_point("resources:recorded")
        self.cgroups.create(pod_rel)
        self.cgroups.apply(pod_rel, kubelet.pod_cgroup(pod))
        self._update_burstable()
        # kuberuntime_container.go computeInitContainerActions: init containers start in the order
        # they are declared; a regular one runs to completion before the next starts, a sidecar
        # (restartPolicy: Always) starts and keeps running while the next ones start
        for c in pod.init_containers:
            if c.sidecar:
                self._pending.append((self._start(pod, c, record, wait=False), record["containers"][c.name]["cgroup"]))
                self.wait_started()
                continue
            code = self._start(pod, c, record).wait()
            record["containers"][c.name]["exit_code"] = code
            self.cgroups.remove(record["containers"][c.name]["cgroup"])
            if code != 0:
                # labkit's runtime does not restart: the Pod ends here, its started sidecars with it
                self.stop(record)
                record["status"] = {"phase": "Failed", "reason": "Init:Error",
                                    "message": f"init container {c.name} exited with {code}"}
                self._write(record)
                return f"init container {c.name} failed (exit {code})"
        for c in pod.containers:
            self._pending.append((self._start(pod, c, record, wait=False), record["containers"][c.name]["cgroup"]))
            crash_point("resources:container-started")
        record["status"] = {"phase": "Running", "startedAt": round(time.time(), 3)}
        self._write(record)
        return f"running ({qos})"

    def _start(self, pod: Pod, container, record: dict, wait: bool = True) -> subprocess.Popen:
        entry = record["containers"][container.name]
        rel = entry["cgroup"]
        self.cgroups.create(rel)
        self.cgroups.apply(rel, kubelet.container_cgroup(pod, container), oom_group=self.cgroups.version == "v2")
        dirs = self.cgroups.join_dirs(rel)
        argv = ["sh", "-c", _ENTER, "sh", str(entry["oom_score_adj"]), str(len(dirs)), *dirs,
                *container_argv(container.command)]
        proc = procs.spawn(self.env, entry["tag"], argv)
        if wait:
            self._wait_joined(proc, rel)
        return proc

    def _wait_joined(self, proc: subprocess.Popen, rel: str) -> None:
        """Until the process runs in its cgroup (the wrapper joins before it executes the command)."""
        deadline = time.monotonic() + 5
        while proc.pid not in self.cgroups.pids(rel) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)

    def _update_burstable(self) -> None:
        """setCPUCgroupConfig: kubepods/burstable's shares follow its Pods' summed cpu requests."""
        shares = kubelet.burstable_shares([p for _r, p in self.active()])
        self.cgroups.apply(self.rel(QOS_DIR[BURSTABLE]), kubelet.CgroupSettings(shares))

    def stop(self, record: dict) -> None:
        tokens = {procs.owner_token(self.env, c["tag"]) for c in record["containers"].values()}
        procs.remove_all(tokens)
        self.cgroups.remove(record["cgroup"])

    def delete(self, name: str) -> dict:
        record = self.record(name)
        if record is None:
            known = ", ".join(r["name"] for r in self.records()) or "none"
            raise LabkitError(f'pods "{name}" not found on {self.name} (Pods: {known})')
        self.stop(record)
        (self.pods_dir / f"{name}.json").unlink(missing_ok=True)
        self._update_burstable()
        return record

    def evict(self, name: str, message: str) -> None:
        """What an eviction leaves: the Pod stopped, phase Failed, reason Evicted (eviction_manager.go evictPod)."""
        record = self.record(name)
        self.stop(record)
        record["status"] = {"phase": "Failed", "reason": "Evicted", "message": message,
                            "conditions": [{"type": "DisruptionTarget", "status": "True",
                                            "reason": "TerminationByKubelet", "message": message}]}
        self._write(record)
        self._update_burstable()

    # -- observing -------------------------------------------------------------------------------

    def containers(self, record: dict) -> list[ContainerView]:
        out = []
        phase = record["status"]["phase"]
        for name, entry in record["containers"].items():
            exists = self.cgroups.exists(entry["cgroup"])
            pids = self.cgroups.pids(entry["cgroup"]) if phase == "Running" and exists else []
            view = ContainerView(name, entry["init"], entry["cgroup"], sorted(pids), "running" if pids else "terminated")
            if entry["init"] and "exit_code" in entry:
                view.state, view.reason, view.exit_code = "completed", "Completed", entry["exit_code"]
            elif phase == "Failed":
                view.state, view.reason = "terminated", record["status"].get("reason", "Error")
            elif not pids:
                memory = self.cgroups.memory(entry["cgroup"]) if exists else None
                # containerd's oomExitReason: the runtime saw an OOM kill in the container's cgroup
                view.reason, view.exit_code = ("OOMKilled", 137) if memory and memory.oom_kills else ("Error", None)
            if pids:
                try:
                    view.oom_score_adj = int(Path(f"/proc/{min(pids)}/oom_score_adj").read_text())
                except (OSError, ValueError):
                    pass
            out.append(view)
        return out

    def memory_available(self) -> tuple[int, int]:
        """(memory.available, working set of kubepods) as the eviction manager computes it."""
        working_set = self.cgroups.memory(self.rel("kubepods")).working_set
        return self.config.memory_capacity - working_set, working_set

    def pod_working_set(self, record: dict) -> int | None:
        if not self.cgroups.exists(record["cgroup"]):
            return None
        return self.cgroups.memory(record["cgroup"]).working_set

    def container_working_set(self, record: dict, container: str) -> int | None:
        rel = record["containers"][container]["cgroup"]
        return self.cgroups.memory(rel).working_set if self.cgroups.exists(rel) else None


def load_pods_strict(path, default_node: str = "", priority_classes: dict | None = None) -> list[Pod]:
    """The Pods of a file as the API server takes them from kubectl v1.34: strict field validation
    first (kubectl asks for fieldValidation=Strict, so an unknown or duplicate field is refused,
    never dropped: labkit.strict), then defaulting and validation (labkit.pods)."""
    from labkit.inputs import read_text
    from labkit.strict import load_strict

    try:
        load_strict(read_text(path), str(path))
    except yaml.YAMLError:
        pass         # load_pods reports the syntax error, with its line
    from labkit.resources.validation import check_consistency
    return [check_consistency(pod, path) for pod in load_pods(path, default_node, priority_classes)]


def load_documents(path, default_node: str, priority_classes: dict, errors: list[str]) -> list[Pod]:
    """The Pods of a file one document at a time, as `kubectl apply -f` sends them: a document the
    API server refuses adds its message to `errors` and the others go on (strict field validation
    still covers the whole file first, as load_pods_strict)."""
    from labkit.errors import ConfigError
    from labkit.inputs import load_yaml_all, read_text
    from labkit.resources.validation import check_consistency
    from labkit.strict import load_strict

    try:
        load_strict(read_text(path), str(path))
    except yaml.YAMLError:
        pass         # load_yaml_all reports the syntax error, with its line
    documents = [d for d in load_yaml_all(Path(path)) if d is not None]
    objects = []
    for i, doc in enumerate(documents):
        where = f"document {i + 1}" if len(documents) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            objects += [(f"{where}: items[{j}]" if where else f"items[{j}]", item) for j, item in enumerate(doc["items"])]
        else:
            objects.append((where, doc))
    if not objects:
        raise ConfigError(path, None, "no Pod found")
    pods = []
    for where, obj in objects:
        try:
            pods.append(check_consistency(pod_from_dict(obj, path, where, default_node, priority_classes), path, where))
        except (ConfigError, PodInvalid) as exc:
            errors.append(str(exc))
    return pods


def lab_nodes(env) -> dict[str, "Node"]:
    """A lab's nodes by name, from their stored configuration (nodes/<node>/node.json)."""
    out = {}
    for path in sorted((Path(env.dir) / "nodes").glob("*/node.json")):
        try:
            config = NodeConfig(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            continue     # cut short by a crash while the node was being made
        out[config.name] = Node(env, config)
    return out


def quantity_string(value: int) -> str:
    """A byte count as resource.NewQuantity(v, BinarySI).String() prints it."""
    return str(Quantity.of(value, BINARY))
