"""Pods and Nodes as kube-scheduler reads them: requests (init-container peaks, sidecars, overhead,
pod-level resources), tolerations against taints, node selectors and affinity terms, label
selectors. Objects are plain dicts in the API's shape (`spec.containers[].resources.requests`);
the fidelity cases' shorthand (`containers[].requests`, `nodeName`, `allocatable`) is read too.
"""

from __future__ import annotations

import datetime
import functools
import math
from dataclasses import dataclass, field

from labkit import quantity

CPU, MEMORY, PODS, EPHEMERAL = "cpu", "memory", "pods", "ephemeral-storage"
# k8s.io/component-helpers/resource: a container without a cpu / memory request counts as this
# much for scoring (DefaultMilliCPURequest, DefaultMemoryRequest in pkg/scheduler/util/pod_resources.go)
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def amount(resource: str, text) -> int:
    """A quantity as the scheduler counts it: cpu in millicores (MilliValue), anything else in
    whole units (Value), both rounded up."""
    value, _fmt = quantity.parse(str(text))
    return math.ceil(value * 1000) if resource == CPU else math.ceil(value)


def amounts(resources: dict | None) -> dict[str, int]:
    return {name: amount(name, text) for name, text in (resources or {}).items()}


def _requests_of(container: dict) -> dict:
    if "requests" in container:                                  # the cases' shorthand
        return container.get("requests") or {}
    return ((container.get("resources") or {}).get("requests")) or {}


def _add(total: dict, more: dict) -> None:
    for name, value in more.items():
        total[name] = total.get(name, 0) + value


def _max_into(total: dict, other: dict) -> None:
    for name, value in other.items():
        if value > total.get(name, 0):
            total[name] = value


class _Object:
    """An object in the API's shape (metadata, spec) or the cases' flat shorthand."""
    obj: dict

    @property
    def meta(self) -> dict:
        return self.obj.get("metadata") or {"name": self.obj.get("name"), "labels": self.obj.get("labels"),
                                            "namespace": self.obj.get("namespace"), "uid": self.obj.get("uid")}

    @property
    def spec(self) -> dict:
        return self.obj["spec"] if "spec" in self.obj else self.obj

    @functools.cached_property
    def name(self) -> str:
        return self.meta.get("name") or ""

    @property
    def labels(self) -> dict:
        return self.meta.get("labels") or {}


@dataclass(eq=False)
class Pod(_Object):
    obj: dict
    _requests: dict = field(default_factory=dict, repr=False)   # non_zero -> requests (a Pod's spec does not change)

    @property
    def namespace(self) -> str:
        return self.meta.get("namespace") or "default"

    @property
    def uid(self) -> str:
        return self.meta.get("uid") or f"uid-{self.namespace}-{self.name}"

    @property
    def priority(self) -> int:
        return int(self.spec.get("priority") or 0)

    @property
    def node_name(self) -> str:
        return self.spec.get("nodeName") or ""

    @property
    def tolerations(self) -> list[dict]:
        return self.spec.get("tolerations") or []

    @property
    def containers(self) -> list[dict]:
        return self.spec.get("containers") or []

    @property
    def init_containers(self) -> list[dict]:
        return self.spec.get("initContainers") or []

    @property
    def start_time(self) -> float:
        """status.startTime as seconds (the cases give a number, the API an RFC 3339 time)."""
        value = self.obj.get("startTime") or (self.obj.get("status") or {}).get("startTime")
        if isinstance(value, str):
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        return float(value or 0)

    def requests(self, non_zero: bool = False) -> dict[str, int]:
        """k8s.io/component-helpers/resource PodRequests: the sum of the regular containers and the
        sidecars (restartable init containers), or the peak of an init container with the sidecars
        started before it, whichever is larger, per resource; plus spec.overhead. Pod-level
        `spec.resources.requests` (PodLevelResources, beta and on in v1.34) replace the container
        aggregate for the resources they name. With `non_zero`, a container without a cpu or
        memory request counts DEFAULT_MILLI_CPU / DEFAULT_MEMORY (the scoring view)."""
        found = self._requests.get(non_zero)
        if found is None:
            found = self._requests[non_zero] = self._compute_requests(non_zero)
        return dict(found)

    def _compute_requests(self, non_zero: bool) -> dict[str, int]:
        def of(container):
            found = amounts(_requests_of(container))
            if non_zero:
                found.setdefault(CPU, DEFAULT_MILLI_CPU)
                found.setdefault(MEMORY, DEFAULT_MEMORY)
            return found

        total: dict[str, int] = {}
        for c in self.containers:
            _add(total, of(c))
        sidecars: dict[str, int] = {}
        init_peak: dict[str, int] = {}
        for c in self.init_containers:
            request = of(c)
            if c.get("restartPolicy") == "Always":
                _add(sidecars, request)
                _add(total, request)
                _max_into(init_peak, sidecars)
            else:
                peak = dict(sidecars)
                _add(peak, request)
                _max_into(init_peak, peak)
        _max_into(total, init_peak)
        pod_level = amounts(((self.spec.get("resources") or {}).get("requests")) or {})
        total.update({k: v for k, v in pod_level.items() if k in (CPU, MEMORY)})
        _add(total, amounts(self.spec.get("overhead")))
        return total

    def host_ports(self) -> list[tuple[str, str, int]]:
        """(hostIP, protocol, hostPort) of every container port with a hostPort."""
        out = []
        for c in self.containers + self.init_containers:
            for p in c.get("ports") or []:
                if p.get("hostPort"):
                    out.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(p["hostPort"])))
        return out


@dataclass(eq=False)
class Node(_Object):
    obj: dict
    _allocatable: dict | None = field(default=None, repr=False)

    @property
    def taints(self) -> list[dict]:
        return self.spec.get("taints") or []

    @property
    def unschedulable(self) -> bool:
        return bool(self.spec.get("unschedulable"))

    @property
    def allocatable(self) -> dict[str, int]:
        if self._allocatable is None:
            raw = self.obj.get("allocatable")
            if raw is None:
                raw = (self.obj.get("status") or {}).get("allocatable") or {}
            self._allocatable = amounts(raw)
        return self._allocatable

    @property
    def images(self) -> list[dict]:
        return self.obj.get("images") or (self.obj.get("status") or {}).get("images") or []


@dataclass(eq=False)
class NodeInfo:
    """A node with the Pods on it (the scheduler cache's NodeInfo). Add Pods with `add` (the sums
    of their requests are kept up to date) or make changed copies with `with_pod` / `without`."""
    node: Node
    pods: list[Pod] = field(default_factory=list)
    _sums: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.node.name

    def add(self, pod: Pod) -> None:
        self.pods.append(pod)
        self._sums.clear()

    def requested(self, non_zero: bool = False) -> dict[str, int]:
        found = self._sums.get(non_zero)
        if found is None:
            found = self._sums[non_zero] = {}
            for pod in self.pods:
                _add(found, pod.requests(non_zero))
        return dict(found)

    def without(self, pods: list[Pod]) -> "NodeInfo":
        gone = {id(p) for p in pods}
        return NodeInfo(self.node, [p for p in self.pods if id(p) not in gone])

    def with_pod(self, pod: Pod) -> "NodeInfo":
        return NodeInfo(self.node, [*self.pods, pod])


# -- tolerations, selectors ------------------------------------------------------------------------


def tolerates(toleration: dict, taint: dict) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint: an empty effect matches every effect, an
    empty key with Exists matches every key, Exists ignores the value, Equal (the default)
    compares it."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: list[dict], tolerations: list[dict], effects: tuple[str, ...]) -> dict | None:
    """v1helper.FindMatchingUntoleratedTaint: the first taint with one of `effects` that no
    toleration tolerates."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def match_expression(expr: dict, value_of) -> bool:
    """One NodeSelectorRequirement / LabelSelectorRequirement; value_of(key) -> (present, value)."""
    present, value = value_of(expr.get("key"))
    op = expr.get("operator")
    values = expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        try:
            have, want = int(value), int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
        return present and (have > want if op == "Gt" else have < want)
    return False


def label_selector_matches(selector: dict | None, labels: dict) -> bool:
    """metav1.LabelSelector: nil matches nothing, {} matches everything."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(match_expression(e, lambda k: (k in labels, labels.get(k)))
               for e in selector.get("matchExpressions") or [])


def node_selector_term_matches(term: dict, node: Node) -> bool:
    """A NodeSelectorTerm: its matchExpressions (labels) and matchFields (metadata.name only)
    ANDed; an empty term matches nothing."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    labels = node.labels
    ok = all(match_expression(e, lambda k: (k in labels, labels.get(k))) for e in exprs)
    return ok and all(match_expression(f, lambda k: (k == "metadata.name", node.name)) for f in fields)
