"""The framework of served resources: a `ResourceType` (group, version, resource, kind, scope)
with its `Strategy` — the per-kind decisions of upstream's registry code, whose generic behaviour
(the generic registry Store) lives in registry/store.py — the generic subresources (`status`,
`scale`) and the `Catalog`, the server's REST mapper. The kinds themselves are in registry/, one
module per API group: to serve a new built-in resource, write a Strategy subclass in its group's
module and add a ResourceType to registry/catalog.py `builtin_types()`; custom resources get theirs
from their CRD (`custom_resource_types`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

from labkit.apiserver import models, tables
from labkit.apiserver.errors import FieldError
from labkit.apiserver.selectors import LabelSelector
from labkit.apiserver.validation import dns1123_subdomain_problems
from labkit.jsondata import json_copy

READ_WRITE = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
NO_COLLECTION_DELETE = ["create", "delete", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]

NAMESPACE_FINALIZER = "kubernetes"        # core/v1 FinalizerKubernetes
ORPHAN_DEPENDENTS = "OrphanDependents"
DELETE_DEPENDENTS = "DeleteDependents"
UNSUPPORTED = "Unsupported"


# -- subresources ----------------------------------------------------------------------------

class Subresource:
    """A subresource served through PUT/PATCH (and GET) of the whole object."""

    name = ""
    verbs: list[str] = []

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        raise NotImplementedError

    def validate(self, obj: dict) -> list[FieldError]:
        return []

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        """The subresource strategy's ValidateUpdate (most need only the new object)."""
        return self.validate(new)


class StatusSubresource(Subresource):
    """`<resource>/status`, with the kind's status strategy: its PrepareForUpdate takes the
    fields in `keeps` (the spec, for most built-in kinds) from the stored object and everything
    else, metadata included, from the request; `status_only` (custom resources) takes only
    `.status` from the request."""

    name = "status"
    verbs = STATUS_VERBS

    def __init__(self, keeps: tuple[str, ...] = ("spec",), status_only: bool = False):
        self.keeps = keeps
        self.status_only = status_only

    def prepare_for_update(self, new: dict, old: dict) -> dict:
        if self.status_only:
            result = json_copy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            for key in ("resourceVersion", "managedFields"):    # what the request's field manager set
                if key in new.get("metadata", {}):
                    result["metadata"][key] = new["metadata"][key]
                else:
                    result["metadata"].pop(key, None)
            return result
        for path in self.keeps:
            *parents, last = path.split(".")
            source, target = old, new
            for part in parents:
                source, target = source.get(part) or {}, target.setdefault(part, {})
            if last in source:
                target[last] = json_copy(source[last])
            else:
                target.pop(last, None)
        return new


# ResetObjectMetaForStatus: status updates of these kinds change no metadata either
RESET_META_FOR_STATUS = ("spec", "metadata.labels", "metadata.annotations", "metadata.finalizers",
                         "metadata.ownerReferences")


class ScaleSubresource(Subresource):
    """`<resource>/scale` (ScaleREST): an autoscaling/v1 Scale view of the object — spec.replicas,
    status.replicas and the selector as a string — whose updates change only spec.replicas.
    `paths` say where the replicas and the selector are (a CRD's scale subresource names them)."""

    name = "scale"
    verbs = STATUS_VERBS

    def __init__(self, spec_replicas: str = ".spec.replicas", status_replicas: str = ".status.replicas",
                 selector: str | None = ".spec.selector", selector_is_map: bool = False,
                 selector_is_string: bool = False):
        self.spec_replicas, self.status_replicas, self.selector = spec_replicas, status_replicas, selector
        self.selector_is_map, self.selector_is_string = selector_is_map, selector_is_string

    def scale_of(self, obj: dict) -> dict:
        from labkit.apiserver.tables import _json_path
        meta = obj["metadata"]
        scale = {"kind": "Scale", "apiVersion": "autoscaling/v1",
                 "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                              if k in meta},
                 "spec": {}, "status": {"replicas": _json_path(obj, self.status_replicas) or 0}}
        replicas = _json_path(obj, self.spec_replicas)
        if replicas:
            scale["spec"]["replicas"] = replicas
        if self.selector:
            selector = _json_path(obj, self.selector)
            if self.selector_is_string:
                text = selector or ""
            elif self.selector_is_map:
                text = ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items()))
            else:
                text = LabelSelector.from_label_selector(selector or {}).text() if selector is not None else ""
            if text:
                scale["status"]["selector"] = text
        return scale

    def set_replicas(self, obj: dict, replicas: int) -> dict:
        result = json_copy(obj)
        node = result
        *parents, last = self.spec_replicas.strip(".").split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = replicas
        return result

# -- strategies ------------------------------------------------------------------------------

class Strategy:
    """Per-kind behaviour. The defaults are the generic registry's."""

    builtin = True
    virtual = False             # a question answered on create, never stored (the access reviews)
    binds_pods = False          # a Binding posted to the collection assigns the Pod it names (bindings)
    # pkg/apis/core/validation: finalizer names without "/" must be standard ones (kube types only;
    # apiextensions, apiregistration and custom resources use apimachinery's generic validation)
    standard_finalizer_names = True
    default_gc_policy: str | None = None
    allow_unconditional_update = True
    return_deleted_object = False
    strategic_merge_patch = True
    field_labels: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    generation = False          # bumps metadata.generation when the spec changes
    printer = tables.DEFAULT

    def name_problems(self, name: str, prefix: bool) -> list[str]:
        return dns1123_subdomain_problems(name, prefix)

    def gc_policy(self, version: str) -> str | None:
        return self.default_gc_policy

    def fields(self, obj: dict) -> dict[str, str]:
        meta = obj.get("metadata", {})
        values = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}
        for label in self.field_labels:
            node = obj
            for part in label.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            values[label] = "" if node is None else str(node)
        return values

    def has_status(self) -> bool:
        return any(s.name == "status" for s in self.subresources)

    def subresource(self, name: str) -> Subresource | None:
        for s in self.subresources:
            if s.name == name:
                return s
        return None

    def prepare_for_create(self, obj: dict) -> None:
        if self.has_status():
            obj.pop("status", None)
        if self.generation:
            obj["metadata"]["generation"] = 1

    def prepare_for_update(self, new: dict, old: dict) -> None:
        if self.has_status():
            if "status" in old:
                new["status"] = json_copy(old["status"])
            else:
                new.pop("status", None)
        if self.generation:
            new["metadata"]["generation"] = old["metadata"].get("generation", 1)
            if new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] += 1

    def begin_create(self, registry, rt: "ResourceType", obj: dict) -> Callable[[], None] | None:
        """The store's BeginCreate hook (runs before prepare_for_create): what a kind's REST
        allocates for a new object; returns the function to call when the create is over."""
        return None

    def begin_update(self, registry, rt: "ResourceType", new: dict, old: dict) -> Callable[[], None] | None:
        """The store's BeginUpdate hook (runs before prepare_for_update)."""
        return None

    def validate(self, obj: dict) -> list[FieldError]:
        return []

    def validate_update(self, new: dict, old: dict) -> list[FieldError]:
        return self.validate(new)

    graceful_deletion = False   # RESTGracefulDeleteStrategy: then check_graceful_delete decides

    def check_graceful_delete(self, obj: dict, options: dict) -> bool:
        """Whether to delete gracefully; sets options["gracePeriodSeconds"] to the period."""
        return False

    def should_delete_during_update(self, new: dict, old: dict) -> bool:
        """Extra condition (besides the generic finalizer rule) for removing the object in an update."""
        return True

    def schema_root(self, rt: "ResourceType"):
        """The shape of the kind for server-side apply and strategic merge patches."""
        from labkit.apiserver import schema
        return schema.for_model(rt.model)

    def delete_warning(self, options: dict) -> str | None:
        """A warning a DELETE with these options gets (the Job storage's, for instance)."""
        return None

    def prune(self, obj: dict, unknown: list[str]) -> dict:
        """Drop what the kind's schema does not have (custom resources; built-in kinds are decoded)."""
        return obj

    def default(self, obj: dict) -> None:
        """Schema defaults (custom resources; built-in kinds get defaults.py's)."""

    def normalize(self, obj: dict) -> None:
        """What the conversion of a decoded object to the internal version changes (after defaulting)."""


# -- the catalogue ---------------------------------------------------------------------------

@dataclass
class ResourceType:
    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    strategy: Strategy
    singular: str = ""
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    verbs: list[str] = field(default_factory=lambda: list(READ_WRITE))
    # a version served from another one's storage (events.k8s.io Events are core Events, autoscaling/v1
    # HorizontalPodAutoscalers v2 ones): the stored (group, version, kind) and the conversions
    stored_as: tuple[str, str, str] | None = None
    to_storage: Callable[[dict], dict] | None = None
    from_storage: Callable[[dict], dict] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        group = self.stored_as[0] if self.stored_as else self.group
        return f"{group}/{self.resource}"

    @functools.cached_property
    def storage_model(self) -> str | None:
        return models.model_name(*self.stored_as) if self.stored_as else self.model

    @functools.cached_property
    def printer(self):
        """The Table printer of the kind's strategy, which reads the stored form."""
        if self.to_storage is None:
            return self.strategy.printer
        columns, row = self.strategy.printer
        return columns, lambda obj: row(self.to_storage(obj))

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @functools.cached_property
    def model(self) -> str | None:
        """The `kubernetes` package's model of a built-in kind (its schema); None for custom resources."""
        return models.model_name(self.group, self.version, self.kind) if self.strategy.builtin else None


class Catalog:
    """Resource types by URL (group, version, resource) and by (apiVersion, kind): the REST mapper."""

    # kube-apiserver's order (the aggregator's groupPriorityMinimum of each built-in group)
    GROUP_ORDER = ["", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
                   "authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
                   "policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
                   "apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
                   "discovery.k8s.io", "flowcontrol.apiserver.k8s.io", "resource.k8s.io"]

    def __init__(self):
        self._types: list[ResourceType] = []
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        self.generation = 0     # bumped on every change, for discovery caches

    def add(self, rt: ResourceType) -> None:
        self.remove(rt.group, rt.version, rt.resource)
        self._types.append(rt)
        self._by_path[(rt.group, rt.version, rt.resource)] = rt
        self._by_kind[(rt.api_version, rt.kind)] = rt
        self.generation += 1

    def remove(self, group: str, version: str, resource: str) -> None:
        rt = self._by_path.pop((group, version, resource), None)
        if rt is not None:
            self._types.remove(rt)
            if self._by_kind.get((rt.api_version, rt.kind)) is rt:
                del self._by_kind[(rt.api_version, rt.kind)]
            self.generation += 1

    def lookup(self, group: str, version: str, resource: str) -> ResourceType | None:
        return self._by_path.get((group, version, resource))

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._types)

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions) in discovery order; the first version is the preferred one."""
        found: dict[str, list[str]] = {}
        for rt in self._types:
            versions = found.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        order = {g: i for i, g in enumerate(self.GROUP_ORDER)}
        return sorted(((g, sorted(v, key=_version_priority)) for g, v in found.items()),
                      key=lambda gv: (order.get(gv[0], len(order)), gv[0]))

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._types if rt.group == group and rt.version == version]


def _version_priority(version: str):
    """Kubernetes version ordering: GA > beta > alpha, then higher numbers first."""
    import re
    m = re.match(r"^v(\d+)(?:(alpha|beta)(\d+))?$", version)
    if not m:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, version)
