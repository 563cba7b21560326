"""Pods as the API server stores them and kubelet reads them: defaulting, validation, QoS class,
and the pod-wide requests and limits kubelet sums up. Kubernetes v1.34, feature gates at their
v1.34 defaults (PodLevelResources beta and on, InPlacePodVerticalScaling on, SidecarContainers GA).

* Defaulting, pkg/apis/core/v1/defaults.go `SetDefaults_Pod`: every container (init ones too)
  whose `limits` name a resource without a request gets the limit as its request; then
  `defaultPodRequests`: with pod-level `spec.resources.limits`, missing pod-level cpu/memory
  requests become the containers' aggregated requests, or the pod-level limit when no container
  asks for that resource.
* Validation, pkg/apis/core/validation/validation.go `ValidateResourceRequirements`: no negative
  quantity; "must be less than or equal to <resource> limit of <limit>" for a request above its
  limit (reported on the `...resources.requests` field, as upstream does); a resource that cannot
  be overcommitted (hugepages, extended resources such as example.com/gpu, `IsOvercommitAllowed`)
  needs a limit and a request equal to it; hugepages need cpu or memory. Several errors are
  printed as the server aggregates them, "[first, second]". Pod-level resources may only name
  cpu and memory (`IsSupportedPodLevelResource`).
* Status: whatever a file says under `status` is not read; the server computes the QoS class
  from the spec (pkg/registry/core/pod/strategy.go PrepareForCreate) and kubelet reads that.
* Priority, plugin/pkg/admission/priority: `spec.priority` comes from `priorityClassName`
  (a Pod may not set it itself); no class means the default priority 0.
* QoS, pkg/apis/core/v1/helper/qos/qos.go `ComputePodQOS` in its v1.33/v1.34 shape: only cpu and
  memory count, zero quantities count as unset; with pod-level resources (gate on in v1.34) only
  `spec.resources` decides; otherwise requests and limits are summed over app and init
  containers, every container needs cpu and memory limits for Guaranteed, and the sums must match.
* A Pod without `metadata.uid` gets a stable UID derived from its namespace and name, so the same
  file applied twice is the same Pod (kubelet keys its state by UID).
* Pod requests and limits, k8s.io/component-helpers/resource `PodRequests` / `PodLimits`: app
  containers and sidecars (restartable init containers) add up, a regular init container counts
  with the sidecars started before it, the larger of the two wins; pod-level values replace the
  aggregate for cpu and memory.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit.apiserver.podvalidation import requirement_errors, validate_pod_containers, with_defaults
from labkit.errors import ConfigError, LabkitError
from labkit.quantity import BINARY, Quantity, quantity_map

GUARANTEED, BURSTABLE, BEST_EFFORT = "Guaranteed", "Burstable", "BestEffort"
QOS_RESOURCES = ("cpu", "memory")
# scheduling/types.go: the two built-in classes; a lab adds its own (lab's node.yaml).
BUILTIN_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# kubelet/types/pod_update.go IsCriticalPodBasedOnPriority: SystemCriticalPriority
SYSTEM_CRITICAL_PRIORITY = 2000000000

Resources = dict[str, Quantity]


class PodInvalid(LabkitError):
    """What the API server answers with 422 Invalid or 403 Forbidden, as kubectl prints it
    (`problem`), after the file and document it came from when there is one."""

    def __init__(self, problem: str, source=None, where: str = ""):
        self.problem = problem
        location = ": ".join(str(x) for x in (source, where) if x)
        super().__init__(f"{location}: {problem}" if location else problem)


@dataclass
class Container:
    name: str
    requests: Resources = field(default_factory=dict)
    limits: Resources = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    init: bool = False
    sidecar: bool = False          # restartPolicy: Always on an init container

    def request(self, resource: str) -> Quantity:
        return self.requests.get(resource, Quantity.of(0))

    def limit(self, resource: str) -> Quantity:
        return self.limits.get(resource, Quantity.of(0))


@dataclass
class Pod:
    name: str
    namespace: str
    uid: str
    node: str
    containers: list[Container]
    init_containers: list[Container] = field(default_factory=list)
    pod_requests: Resources | None = None     # spec.resources (None: not set)
    pod_limits: Resources | None = None
    priority: int = 0
    priority_class: str = ""
    manifest: dict = field(default_factory=dict)   # the defaulted object, as stored

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pod_level_set(self) -> bool:
        """IsPodLevelResourcesSet: spec.resources names cpu or memory."""
        names = set(self.pod_requests or {}) | set(self.pod_limits or {})
        return bool(names & set(QOS_RESOURCES))

    def all_containers(self) -> list[Container]:
        """Init containers then app containers: the order kubelet admits and allocates them in."""
        return self.init_containers + self.containers

    def is_init_container(self, name: str) -> bool:
        return any(c.name == name for c in self.init_containers)

    def is_regular_init_container(self, name: str) -> bool:
        """An init container that runs to completion before the next one starts (not a sidecar)."""
        return any(c.name == name and not c.sidecar for c in self.init_containers)

    def running_containers(self) -> list[Container]:
        """What runs for good: sidecars and app containers (regular init containers finish first)."""
        return [c for c in self.init_containers if c.sidecar] + self.containers

    def is_critical(self) -> bool:
        return self.priority >= SYSTEM_CRITICAL_PRIORITY

    def is_node_critical(self) -> bool:
        """types.IsNodeCriticalPod: a critical Pod of class system-node-critical."""
        return self.is_critical() and self.priority_class == "system-node-critical"


# -- reading -------------------------------------------------------------------------------------

def stable_uid(namespace: str, name: str, scope: str = "labkit") -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{scope}/{namespace}/{name}"))


def _default_requests(requests: Resources, limits: Resources) -> Resources:
    """SetDefaults_Pod for one container: a limit without a request becomes the request."""
    out = dict(requests)
    for name, quantity in limits.items():
        out.setdefault(name, quantity)
    return out


def pod_from_dict(data: Any, source=None, where: str = "", default_node: str = "",
                  priority_classes: dict[str, int] | None = None, defaulting: bool = True,
                  validation: bool = True, uid_scope: str = "labkit") -> Pod:
    """Read, default, validate and admit (priority) one Pod manifest, as the API server would.

    defaulting=False / validation=False take the Pod as written, as kubelet's unit tests hand Pods
    to kubelet code directly (without validation, spec.priority is taken as given)."""
    shown = source or "<pod>"
    if not isinstance(data, dict) or data.get("kind", "Pod") != "Pod":
        raise ConfigError(shown, where or None, "expected a Pod (kind: Pod)")
    meta = data.get("metadata") or {}
    if not isinstance(meta, dict):
        raise ConfigError(shown, _at(where, "metadata"), "expected a mapping with the Pod's name")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(shown, _at(where, "metadata.name"), "expected the Pod's name")
    namespace = meta.get("namespace") or "default"
    spec = data.get("spec")
    if not isinstance(spec, dict):
        raise ConfigError(shown, _at(where, "spec"), "expected the Pod spec")
    containers = _containers(spec.get("containers"), shown, _at(where, "spec.containers"), False, defaulting,
                             validation)
    init_containers = _containers(spec.get("initContainers"), shown, _at(where, "spec.initContainers"), True,
                                  defaulting, validation)
    names = [c.name for c in init_containers + containers]
    for i, cname in enumerate(names):
        if cname in names[:i] and not validation:   # with validation: the API server's Duplicate value
            raise ConfigError(shown, _at(where, "spec"), f"container name {cname!r} is used twice")
    pod_requests = pod_limits = None
    if spec.get("resources") is not None:
        if not isinstance(spec["resources"], dict):
            raise ConfigError(shown, _at(where, "spec.resources"), "expected requests and/or limits")
        pod_requests = quantity_map(spec["resources"].get("requests"), shown, _at(where, "spec.resources.requests"))
        pod_limits = quantity_map(spec["resources"].get("limits"), shown, _at(where, "spec.resources.limits"))
    pod = Pod(name, namespace, str(meta.get("uid") or stable_uid(namespace, name, uid_scope)),
              str(spec.get("nodeName") or default_node), containers, init_containers, pod_requests, pod_limits)
    if defaulting:
        _default_pod_requests(pod)
    if not validation:
        pod.priority, pod.priority_class = int(spec.get("priority") or 0), spec.get("priorityClassName") or ""
        return pod
    validate(pod, source, where, spec)
    _admit_priority(pod, spec, priority_classes or {})
    pod.manifest = manifest(pod, data)
    return pod


def _containers(items: Any, source, where: str, init: bool, defaulting: bool = True,
                validation: bool = True) -> list[Container]:
    if items is None and init:
        return []
    if not isinstance(items, list) or (not init and not items):
        raise ConfigError(source, where, "expected a list of containers" if init else "expected a non-empty list of containers")
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(source, f"{at}.name", "expected the container's name")
        resources = item.get("resources") or {}
        if not isinstance(resources, dict):
            raise ConfigError(source, f"{at}.resources", "expected requests and/or limits")
        limits = quantity_map(resources.get("limits"), source, f"{at}.resources.limits")
        requests = quantity_map(resources.get("requests"), source, f"{at}.resources.requests")
        if defaulting:
            requests = _default_requests(requests, limits)
        argv = list(item.get("command") or []) + list(item.get("args") or [])
        if not all(isinstance(a, (str, int, float)) for a in argv):
            raise ConfigError(source, f"{at}.command", "expected a list of strings")
        restart = item.get("restartPolicy")
        if not validation and (restart not in (None, "Always") or (restart and not init)):
            raise ConfigError(source, f"{at}.restartPolicy", "only init containers may set it, and only to Always (sidecars)")
        out.append(Container(item["name"], requests, limits, [str(a) for a in argv], init, restart == "Always"))
    return out


def _default_pod_requests(pod: Pod) -> None:
    """defaultPodRequests (defaults.go): pod-level requests from the containers or the pod-level limits."""
    if pod.pod_limits is None or not pod.pod_limits:
        return
    requests = dict(pod.pod_requests or {})
    aggregated = aggregate_container_requests(pod)
    for name, quantity in aggregated.items():
        if name in QOS_RESOURCES and name not in requests:
            requests[name] = quantity
    for name, quantity in pod.pod_limits.items():
        if name in QOS_RESOURCES and name not in requests:
            requests[name] = quantity
    if requests:
        pod.pod_requests = requests


def validate(pod: Pod, source=None, where: str = "", spec: dict | None = None) -> None:
    """The API server's checks, with its texts; raises PodInvalid as kubectl prints it.

    The containers and init containers (names, ports, resource names, requests against limits,
    restartPolicy) go through the API server's own validator, labkit.apiserver.podvalidation, on
    the defaulted requests and limits; `image` is not required here (the labs' containers run
    host commands, no image is pulled). Then the pod-level resources."""
    errors = [str(e) for e in validate_pod_containers(
        with_defaults(spec if spec is not None else _spec_of(pod)), "spec",
        requirements=lambda c, kind, i: _defaulted(pod, kind, i), require_image=False)]
    if pod.pod_requests is not None or pod.pod_limits is not None:
        for part, values in (("requests", pod.pod_requests or {}), ("limits", pod.pod_limits or {})):
            for name in values:
                if name not in QOS_RESOURCES:
                    errors.append(f'spec.resources.{part}[{name}]: Unsupported value: "{name}": '
                                  'supported values: "cpu", "memory"')
        errors += [str(e) for e in requirement_errors("spec.resources", pod.pod_requests or {}, pod.pod_limits or {})]
    if errors:   # field.ErrorList.ToAggregate: one error as it is, several in brackets
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise PodInvalid(f'The Pod "{pod.name}" is invalid: {detail}', source, where)


def _spec_of(pod: Pod) -> dict:
    """The containers of a Pod built in code (no manifest): names and sidecars."""
    def raw(c: Container) -> dict:
        return {"name": c.name, **({"restartPolicy": "Always"} if c.sidecar else {})}
    return {"containers": [raw(c) for c in pod.containers], "initContainers": [raw(c) for c in pod.init_containers]}


def _defaulted(pod: Pod, kind: str, index: int) -> tuple[Resources, Resources]:
    containers = pod.init_containers if kind == "initContainers" else pod.containers
    if index >= len(containers):
        return {}, {}
    return containers[index].requests, containers[index].limits


def _admit_priority(pod: Pod, spec: dict, classes: dict[str, int]) -> None:
    """The Priority admission plugin: priority from priorityClassName, never from the Pod itself."""
    known = {**BUILTIN_PRIORITY_CLASSES, **classes}
    class_name = spec.get("priorityClassName") or ""
    if class_name and class_name not in known:
        raise PodInvalid(f'pods "{pod.name}" is forbidden: no PriorityClass with name {class_name} was found')
    value = known.get(class_name, 0)
    given = spec.get("priority")
    if given is not None and given != value:
        raise PodInvalid(f'pods "{pod.name}" is forbidden: the integer value of priority ({given}) must not be '
                         f'provided in pod spec; priority admission controller computed {value} from the given '
                         'PriorityClass name')
    pod.priority, pod.priority_class = value, class_name


def manifest(pod: Pod, original: dict) -> dict:
    """The object as stored after defaulting: requests filled in, priority and qosClass set."""
    import copy

    out = copy.deepcopy(original)
    out.setdefault("apiVersion", "v1")
    out["kind"] = "Pod"
    out.setdefault("metadata", {})["namespace"] = pod.namespace
    out["metadata"]["uid"] = pod.uid
    spec = out["spec"]
    spec["nodeName"] = pod.node
    spec["priority"] = pod.priority
    for kind, items in (("initContainers", pod.init_containers), ("containers", pod.containers)):
        for raw, c in zip(spec.get(kind) or [], items):
            if c.requests:
                raw.setdefault("resources", {})["requests"] = {k: str(v) for k, v in c.requests.items()}
    if pod.pod_requests:
        spec["resources"]["requests"] = {k: str(v) for k, v in pod.pod_requests.items()}
    out["status"] = {"qosClass": qos_class(pod)}
    return out


def load_pods(path, default_node: str = "", priority_classes: dict[str, int] | None = None,
              allow_empty: bool = False, uid_scope: str = "labkit") -> list[Pod]:
    """Pods from a YAML file: one Pod, several documents, or a `kind: List` with items (with
    `allow_empty`, a file without any document is no Pod at all)."""
    from labkit.inputs import load_yaml_all

    path = Path(path)
    documents = [d for d in load_yaml_all(path) if d is not None]
    objects: list[tuple[str, Any]] = []
    for i, doc in enumerate(documents):
        where = f"document {i + 1}" if len(documents) > 1 else ""
        if isinstance(doc, dict) and doc.get("kind") == "List":
            items = doc.get("items")
            if not isinstance(items, list):
                raise ConfigError(path, _at(where, "items"), "expected a list of Pods")
            objects += [(_at(where, f"items[{j}]"), item) for j, item in enumerate(items)]
        else:
            objects.append((where, doc))
    if not objects:
        if allow_empty:
            return []
        raise ConfigError(path, None, "no Pod found")
    pods = [pod_from_dict(obj, path, where, default_node, priority_classes, uid_scope=uid_scope)
            for where, obj in objects]
    uids = [p.uid for p in pods]
    for i, uid in enumerate(uids):
        if uid in uids[:i]:
            raise ConfigError(path, objects[i][0] or None, f"Pod {pods[i].name!r} repeats the UID {uid}")
    return pods


def _at(prefix: str, field_name: str) -> str:
    return f"{prefix}: {field_name}" if prefix else field_name


# -- QoS ------------------------------------------------------------------------------------------

def _add_positive(total: Resources, values: Resources) -> None:
    """processResourceList: add the cpu/memory quantities above zero."""
    for name, q in values.items():
        if name in QOS_RESOURCES and q.value > 0:
            total[name] = q.add(total[name]) if name in total else q


def _has_cpu_and_memory_limits(limits: Resources) -> bool:
    return all(name in limits and limits[name].value > 0 for name in QOS_RESOURCES)


def _qos_inputs(pod: Pod) -> tuple[Resources, Resources, bool]:
    """What ComputePodQOS looks at: the summed positive requests and limits, and whether every
    container (or the pod level) limits both cpu and memory."""
    requests: Resources = {}
    limits: Resources = {}
    guaranteed = True
    if pod.pod_requests is not None or pod.pod_limits is not None:
        _add_positive(requests, pod.pod_requests or {})
        if pod.pod_limits:
            _add_positive(limits, pod.pod_limits)
            guaranteed = _has_cpu_and_memory_limits(pod.pod_limits)
    else:
        for c in pod.containers + pod.init_containers:
            _add_positive(requests, c.requests)
            _add_positive(limits, c.limits)
            guaranteed = _has_cpu_and_memory_limits(c.limits) and guaranteed
    return requests, limits, guaranteed


def qos_class(pod: Pod) -> str:
    """ComputePodQOS (v1.34 shape, PodLevelResources on)."""
    requests, limits, guaranteed = _qos_inputs(pod)
    if not requests and not limits:
        return BEST_EFFORT
    matching = all(name in limits and limits[name].value == q.value for name, q in requests.items()) \
        and len(requests) == len(limits)
    return GUARANTEED if guaranteed and matching else BURSTABLE


def qos_signature(pod: Pod) -> tuple:
    """Everything of a Pod that its QoS class depends on, and nothing else: which resources it
    requests and limits, whether each request equals its limit, and whether cpu and memory are
    limited everywhere. Two Pods with the same signature have the same class whatever their
    names and amounts."""
    requests, limits, guaranteed = _qos_inputs(pod)
    return (tuple(sorted(requests)), tuple(sorted(limits)), guaranteed,
            tuple(sorted(name for name, q in requests.items() if name in limits and limits[name].value == q.value)))


# -- pod-wide requests and limits ----------------------------------------------------------------

def _add(total: Resources, values: Resources) -> Resources:
    out = dict(total)
    for name, q in values.items():
        out[name] = q.add(out[name]) if name in out else q
    return out


def _max(a: Resources, b: Resources) -> Resources:
    out = dict(a)
    for name, q in b.items():
        if name not in out or q.value > out[name].value:
            out[name] = q
    return out


def _aggregate(pod: Pod, kind: str, visit=None) -> Resources:
    """AggregateContainerRequests / AggregateContainerLimits (no in-place resize in flight)."""
    total: Resources = {}
    for c in pod.containers:
        values = getattr(c, kind)
        if visit:
            visit(c)
        total = _add(total, values)
    sidecars: Resources = {}
    init_max: Resources = {}
    for c in pod.init_containers:
        values = getattr(c, kind)
        if visit:
            visit(c)
        if c.sidecar:
            total = _add(total, values)
            sidecars = _add(sidecars, values)
            effective = sidecars
        else:
            effective = _add(values, sidecars)
        init_max = _max(init_max, effective)
    return _max(total, init_max)


def aggregate_container_requests(pod: Pod) -> Resources:
    return _aggregate(pod, "requests")


def pod_requests(pod: Pod) -> Resources:
    """PodRequests: the aggregate, with pod-level cpu/memory requests in its place when set."""
    out = _aggregate(pod, "requests")
    for name, q in (pod.pod_requests or {}).items():
        if name in QOS_RESOURCES:
            out[name] = q
    return out


def pod_limits(pod: Pod, visit=None) -> Resources:
    out = _aggregate(pod, "limits", visit)
    for name, q in (pod.pod_limits or {}).items():
        if name in QOS_RESOURCES:
            out[name] = q
    return out


def pod_request(pod: Pod, resource: str) -> Quantity:
    """GetResourceRequestQuantity, as the eviction manager reads it."""
    return pod_requests(pod).get(resource, Quantity.of(0, BINARY if resource == "memory" else "DecimalSI"))
