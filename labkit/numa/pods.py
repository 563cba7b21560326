"""Pods as kubelet's resource managers see them, read from Kubernetes YAML, and their QoS class.

A Pod file is what someone asks the API server to create; kubelet sees the object the server
stored. So, as the server does (Kubernetes v1.34):
* defaulting (`SetDefaults_Pod`, pkg/apis/core/v1/defaults.go): a limit without a request
  becomes the request;
* validation (pkg/apis/core/validation/validation.go validateResourceRequirements): a request
  above its limit, a request different from the limit of a resource that cannot be overcommitted
  (hugepages, extended resources such as example.com/gpu) or without such a limit, a negative
  quantity, and hugepages without cpu or memory are refused with the server's messages
  (PodInvalid, as kubectl prints them);
* status: whatever the file says under `status` is not read. The server sets the status of a new
  Pod itself, its QoS class computed from the spec (pkg/registry/core/pod/strategy.go
  PrepareForCreate), and that class is what kubelet reads.

Pod-level resources (`spec.resources`, beta and on by default in v1.34) are not part of this
reconstruction: such a Pod is refused with a message saying so.

Only what the managers use is kept: UID, name, init containers (with `restartPolicy: Always` for
sidecars) and app containers, each with resource requests and limits. A Pod without
`metadata.uid` gets a stable UID derived from its namespace and name, so the same Pod file
admitted twice is the same Pod (kubelet keys all its state by UID).

QoS follows `pkg/apis/core/helper/qos/qos.go` ComputePodQOS: only cpu and memory count; requests
and limits > 0 are summed over all app and init containers; Guaranteed needs every container to
have cpu and memory limits and the summed requests to equal the summed limits; nothing at all is
BestEffort; the rest Burstable.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from labkit.errors import ConfigError
from labkit.numa.quantity import Quantity, QuantityError

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"
_QOS_RESOURCES = ("cpu", "memory")


class PodInvalid(ConfigError):
    """The API server refuses to create the Pod (its validation message, as kubectl prints it)."""


@dataclass
class Container:
    name: str
    requests: dict[str, Quantity] = field(default_factory=dict)
    limits: dict[str, Quantity] = field(default_factory=dict)
    restart_policy: str | None = None   # "Always" marks a sidecar (restartable init container)

    @property
    def restartable(self) -> bool:
        return self.restart_policy == "Always"


@dataclass
class Pod:
    name: str
    uid: str
    namespace: str = "default"
    init_containers: list[Container] = field(default_factory=list)
    containers: list[Container] = field(default_factory=list)

    def all_containers(self) -> list[Container]:
        """Init containers then app containers: the order kubelet admits and allocates them in."""
        return self.init_containers + self.containers

    def is_init_container(self, name: str) -> bool:
        return any(c.name == name for c in self.init_containers)

    def is_regular_init_container(self, name: str) -> bool:
        return any(c.name == name and not c.restartable for c in self.init_containers)


def qos_class(pod: Pod) -> str:
    """ComputePodQOS: the class the API server stores in status.qosClass when it creates the Pod."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    for container in pod.containers + pod.init_containers:
        for name, quantity in container.requests.items():
            if name in _QOS_RESOURCES and quantity.value > 0:
                requests[name] = quantity.add(requests[name]) if name in requests else quantity
        found = set()
        for name, quantity in container.limits.items():
            if name in _QOS_RESOURCES and quantity.value > 0:
                found.add(name)
                limits[name] = quantity.add(limits[name]) if name in limits else quantity
        if not {"cpu", "memory"} <= found:
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed:
        for name, request in requests.items():
            if name not in limits or limits[name].value != request.value:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return GUARANTEED
    return BURSTABLE


def stable_uid(namespace: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"labkit-numa/{namespace}/{name}"))


def load_pods(path: str | Path, allow_empty: bool = False) -> list[Pod]:
    """Pods from a YAML file: one Pod, several documents, or a `kind: List` with items (with
    `allow_empty`, a file without any document is no Pod at all)."""
    path = Path(path)
    from labkit.inputs import load_yaml_all

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
    pods = [pod_from_dict(obj, path, where) for where, obj in objects]
    uids = [p.uid for p in pods]
    for i, uid in enumerate(uids):
        if uid in uids[:i]:
            raise ConfigError(path, objects[i][0] or None, f"Pod {pods[i].name!r} repeats the UID {uid}")
    return pods


def pod_from_dict(data: Any, source: str | Path = "<pod>", where: str = "", validate: bool = True) -> Pod:
    """A Pod as the API server would store it; `validate=False` skips the server's validation, as
    kubelet's own unit tests do when they build Pod objects directly."""
    if not isinstance(data, dict) or data.get("kind", "Pod") != "Pod":
        raise ConfigError(source, where or None, "expected a Pod (kind: Pod)")
    meta = data.get("metadata") or {}
    if not isinstance(meta, dict):
        raise ConfigError(source, _at(where, "metadata"), "expected a mapping with the Pod's name")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(source, _at(where, "metadata.name"), "expected the Pod's name")
    namespace = meta.get("namespace") or "default"
    uid = str(meta.get("uid") or stable_uid(namespace, name))
    spec = data.get("spec")
    if not isinstance(spec, dict):
        raise ConfigError(source, _at(where, "spec"), "expected the Pod spec")
    if spec.get("resources"):
        raise ConfigError(source, _at(where, "spec.resources"), "pod-level resources are not part of labkit's "
                          "reconstruction of the resource managers; set resources per container")
    containers = _containers(spec.get("containers"), source, _at(where, "spec.containers"), required=True)
    init_containers = _containers(spec.get("initContainers"), source, _at(where, "spec.initContainers"))
    names = [c.name for c in init_containers + containers]
    for i, cname in enumerate(names):
        if cname in names[:i]:
            raise ConfigError(source, _at(where, "spec"), f"container name {cname!r} is used twice")
    errors = [e for kind, items in (("initContainers", init_containers), ("containers", containers))
              for i, c in enumerate(items) for e in validate_resources(c, f"spec.{kind}[{i}].resources")]
    if errors and validate:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise PodInvalid(source, where or None, f'The Pod "{name}" is invalid: {detail}')
    return Pod(name, uid, namespace, init_containers, containers)


def _overcommit_allowed(resource: str) -> bool:
    """IsOvercommitAllowed: a native resource (no domain, or kubernetes.io) that is not hugepages."""
    domain = resource.split("/")[0] if "/" in resource else ""
    native = not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return native and not resource.startswith("hugepages-")


def validate_resources(container: Container, where: str) -> list[str]:
    """validateResourceRequirements on the defaulted requests and limits of one container."""
    errors = []
    for resource in sorted(container.limits):
        if container.limits[resource].value < 0:
            errors.append(f'{where}.limits[{resource}]: Invalid value: "{container.limits[resource]}": '
                          "must be greater than or equal to 0")
    for resource in sorted(container.requests):
        request = container.requests[resource]
        if request.value < 0:
            errors.append(f'{where}.requests[{resource}]: Invalid value: "{request}": must be greater than or equal to 0')
        limit = container.limits.get(resource)
        if limit is not None:
            if request.value != limit.value and not _overcommit_allowed(resource):
                errors.append(f'{where}.requests: Invalid value: "{request}": must be equal to {resource} limit of {limit}')
            elif request.value > limit.value:
                errors.append(f'{where}.requests: Invalid value: "{request}": must be less than or equal to '
                              f"{resource} limit of {limit}")
        elif not _overcommit_allowed(resource):
            errors.append(f"{where}.limits: Required value: Limit must be set for non overcommitable resources")
    names = set(container.requests) | set(container.limits)
    if any(n.startswith("hugepages-") for n in names) and not names & {"cpu", "memory"}:
        errors.append(f"{where}: Forbidden: HugePages require cpu or memory")
    return errors


def _containers(items: Any, source, where: str, required: bool = False) -> list[Container]:
    if items is None and not required:
        return []
    if not isinstance(items, list) or (required and not items):
        raise ConfigError(source, where, "expected a non-empty list of containers" if required else "expected a list")
    out = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(source, f"{at}.name", "expected the container's name")
        resources = item.get("resources") or {}
        if not isinstance(resources, dict):
            raise ConfigError(source, f"{at}.resources", "expected requests and/or limits")
        limits = _resource_list(resources.get("limits"), source, f"{at}.resources.limits")
        requests = _resource_list(resources.get("requests"), source, f"{at}.resources.requests")
        for resource, quantity in limits.items():   # API defaulting: request = limit when unset
            requests.setdefault(resource, quantity)
        restart = item.get("restartPolicy")
        if restart not in (None, "Always"):
            raise ConfigError(source, f"{at}.restartPolicy", "the only allowed value is Always (sidecar containers)")
        if restart and not where.endswith("initContainers"):
            raise ConfigError(source, f"{at}.restartPolicy", "only init containers may set restartPolicy")
        out.append(Container(item["name"], requests, limits, restart))
    return out


def _resource_list(data: Any, source, where: str) -> dict[str, Quantity]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(source, where, "expected a map of resource name to quantity")
    out = {}
    for name, value in data.items():
        try:
            out[str(name)] = Quantity.parse(value)
        except QuantityError as exc:
            raise ConfigError(source, f"{where}.{name}", f"{value!r}: {exc}") from None
    return out


def _at(prefix: str, field_name: str) -> str:
    return f"{prefix}: {field_name}" if prefix else field_name
