"""A Pod's `resize` subresource as kube-apiserver v1.34 serves it: what `kubectl patch pod NAME
--subresource resize --patch ...` changes and what it refuses. InPlacePodVerticalScaling is beta and
on by default since v1.33 (pkg/features/kube_features.go), so v1.34 changes a running Pod's CPU and
memory in place through this subresource, and only through it (a plain update of the Pod still
refuses any change of spec.containers[*].resources).

One reconstruction for every reader: the embedded API server's `pods/resize`
(labkit.apiserver.registry.pod) and the resources lab's nodes (`labkit resources patch ...
--subresource resize`, labkit.resources.node) take and refuse the same resizes with the same texts.

* `prepare_resize(new, old)` — podResizeStrategy.PrepareForUpdate (pkg/registry/core/pod/strategy.go):
  dropNonResizeUpdates keeps the stored Pod and takes from the request only each container's
  `resources` and `resizePolicy` (init containers' too: validation then refuses a change of a
  non-sidecar one), matched by position; when containers were added, removed or reordered the
  request's spec is kept as sent, for validation to refuse; metadata as a status update keeps it
  (ResetObjectMetaForStatus); metadata.generation goes up when the spec changed (updatePodGeneration).
* `validate_resize(new, old)` — ValidatePodResize (pkg/apis/core/validation/validation.go), in its
  order: the Pod's spec valid (validatePodMetadataAndSpec, the container checks of
  labkit.apiserver.podvalidation); pod-level resources, static and Windows Pods cannot be resized;
  the QoS class stays (`GetPodQOS(old)`, the stored status.qosClass, against `ComputePodQOS(new)`);
  a node that reports running containers without status resources does not support resize
  (isPodResizeRequestSupported); per container and sidecar, validateContainerResize: requests and
  limits cannot be removed, a memory limit cannot be lowered or added unless the container's
  memory resizePolicy is RestartContainer (v1.34; later releases lift this); only cpu and memory
  of containers and sidecars change, non-sidecar init containers not at all; then nothing else of
  the spec may differ.
"""

from __future__ import annotations


from labkit.apiserver.errors import FieldError, field_forbidden, field_invalid
from labkit.quantity import QuantityError, parse
from labkit.jsondata import json_copy

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
RESTART_CONTAINER = "RestartContainer"
NOT_REQUIRED = "NotRequired"


def default_resize_policy(spec: dict) -> None:
    """SetDefaults_Pod (pkg/apis/core/v1/defaults.go, InPlacePodVerticalScaling on): a regular
    container that requests cpu or memory gets restartPolicy NotRequired for each of them unless
    its resizePolicy names it (init containers get none). For Pods only, not pod templates."""
    for c in spec.get("containers") or []:
        if not isinstance(c, dict):
            continue
        requests = (c.get("resources") or {}).get("requests") if isinstance(c.get("resources"), dict) else None
        if not isinstance(requests, dict) or not isinstance(c.get("resizePolicy") or [], list):
            continue
        named = {p.get("resourceName") for p in c.get("resizePolicy") or [] if isinstance(p, dict)}
        for resource in ("cpu", "memory"):
            if resource in requests and resource not in named:
                c.setdefault("resizePolicy", []).append({"resourceName": resource, "restartPolicy": NOT_REQUIRED})


def status_resources(resources: dict | None) -> dict:
    """containerStatuses[*].resources as kubelet v1.34 reports them once actuated: the cpu and
    memory requests and limits in force (kuberuntime convertToAPIContainerStatuses)."""
    out = {}
    for which in ("requests", "limits"):
        values = {k: v for k, v in ((resources or {}).get(which) or {}).items() if k in ("cpu", "memory")}
        if values:
            out[which] = values
    return out


def _containers(spec: dict, key: str) -> list:
    return [c for c in spec.get(key) or [] if isinstance(c, dict)]


def _sidecar(container: dict) -> bool:
    return container.get("restartPolicy") == "Always"


def prepare_resize(new: dict, old: dict) -> dict:
    """dropNonResizeUpdates + ResetObjectMetaForStatus + updatePodGeneration (see the module)."""
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    result = json_copy(old)
    for key in ("resourceVersion", "managedFields"):     # what the request and its field manager set
        if key in (new.get("metadata") or {}):
            result["metadata"][key] = new["metadata"][key]
        else:
            result["metadata"].pop(key, None)
    spec = result.setdefault("spec", {})
    same_shape = all(len(_containers(new_spec, key)) == len(_containers(old_spec, key))
                     for key in ("containers", "initContainers"))
    for key in ("containers", "initContainers"):
        sent, stored = _containers(new_spec, key), _containers(old_spec, key)
        if not same_shape or any(a.get("name") != b.get("name") for a, b in zip(sent, stored)):
            if sent or key in new_spec:
                spec[key] = json_copy(new_spec.get(key))      # validation refuses it
            continue
        merged = json_copy(stored)
        for mine, theirs in zip(merged, sent):
            for field in ("resources", "resizePolicy"):
                if field in theirs:
                    mine[field] = json_copy(theirs[field])
                else:
                    mine.pop(field, None)
        if merged:
            spec[key] = merged
    if spec != old_spec:
        result["metadata"]["generation"] = (old["metadata"].get("generation") or 1) + 1
    return result


def _amount(value):
    try:
        return parse(str(value))[0]
    except QuantityError:
        return None


def _resource_list(resources: dict | None, which: str) -> dict | None:
    value = (resources or {}).get(which)
    return value if isinstance(value, dict) and value else None


def _container_resize_errors(new: dict, old: dict, at: str) -> list[FieldError]:
    """validateContainerResize."""
    errors: list[FieldError] = []
    new_res, old_res = new.get("resources") or {}, old.get("resources") or {}
    for which in ("requests", "limits"):
        now, before = _resource_list(new_res, which) or {}, _resource_list(old_res, which) or {}
        if len(before) > len(now) or any(name not in now for name in before):
            errors.append(field_forbidden(f"{at}.{which}", f"resource {which} cannot be removed"))
    policy = ""
    for p in new.get("resizePolicy") or []:
        if isinstance(p, dict) and p.get("resourceName") == "memory":
            policy = p.get("restartPolicy") or ""
            break
    if policy in (NOT_REQUIRED, ""):
        now = (_resource_list(new_res, "limits") or {}).get("memory")
        before = (_resource_list(old_res, "limits") or {}).get("memory")
        if now is not None and before is not None:
            a, b = _amount(now), _amount(before)
            if a is not None and b is not None and a < b:
                errors.append(field_forbidden(f"{at}.limits[memory]", "memory limits cannot be decreased "
                                                                      f"unless resizePolicy is {RESTART_CONTAINER}"))
        elif now is not None:
            errors.append(field_forbidden(f"{at}.limits[memory]", "memory limits cannot be added "
                                                                  f"unless resizePolicy is {RESTART_CONTAINER}"))
    return errors


def _without_cpu_memory_changes(container: dict, old: dict) -> dict:
    """dropCPUMemoryResourcesFromContainer: the container with the old cpu and memory values (a
    list the old container did not have at all is dropped)."""
    result = json_copy(container)
    resources = {}
    for which in ("limits", "requests"):
        before = _resource_list(old.get("resources"), which)
        if before is None:
            continue
        munged = {k: v for k, v in ((container.get("resources") or {}).get(which) or {}).items()
                  if k not in ("cpu", "memory")}
        munged.update({k: before[k] for k in ("cpu", "memory") if k in before})
        resources[which] = munged
    result["resources"] = resources
    return result


def _same_container(a: dict, b: dict) -> bool:
    """apiequality.Semantic.DeepEqual for what a resize may touch: quantities by value."""
    def norm(c: dict) -> dict:
        c = json_copy(c)
        resources = {}
        for which in ("limits", "requests"):
            values = _resource_list(c.get("resources"), which)
            if values is not None:
                resources[which] = {k: _amount(v) if _amount(v) is not None else v for k, v in values.items()}
        c["resources"] = resources
        return c
    return norm(a) == norm(b)


def validate_resize(new: dict, old: dict, qos_of_spec, require_image: bool = True) -> list[FieldError]:
    """ValidatePodResize (see the module); `qos_of_spec` is ComputePodQOS on a Pod spec;
    `require_image=False` for the labs' Pods, whose containers run host commands (labkit.pods)."""
    from labkit.apiserver.podvalidation import validate_pod_containers

    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors = validate_pod_containers(new_spec, require_image=require_image)

    def pod_level(spec: dict) -> bool:
        resources = spec.get("resources") or {}
        return bool((resources.get("requests") or {}) or (resources.get("limits") or {}))

    if pod_level(old_spec) or pod_level(new_spec):
        return [field_forbidden("", "pods with pod-level resources cannot be resized")]
    if MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [field_forbidden("", "static pods cannot be resized")]
    if ((old_spec.get("os") or {}).get("name")) == "windows":
        return [field_forbidden("", "windows pods cannot be resized")]

    old_qos = (old.get("status") or {}).get("qosClass") or qos_of_spec(old_spec)
    if old_qos != qos_of_spec(new_spec):
        errors.append(field_invalid("spec", (new.get("status") or {}).get("qosClass", ""),
                                    "Pod QOS Class may not change as a result of resizing"))
    for status in (old.get("status") or {}).get("containerStatuses") or []:
        if isinstance(status, dict) and (status.get("state") or {}).get("running") is not None:
            if status.get("resources") is None:
                errors.append(field_forbidden("spec", "Pod running on node without support for resize"))
            break

    new_inits, old_inits = _containers(new_spec, "initContainers"), _containers(old_spec, "initContainers")
    new_ctrs, old_ctrs = _containers(new_spec, "containers"), _containers(old_spec, "containers")
    if len(new_inits) != len(old_inits) or len(new_ctrs) != len(old_ctrs):
        # upstream indexes the new lists by the old ones' positions (and would panic on fewer);
        # what it would report in the end: the spec changed beyond cpu and memory
        return errors + [field_forbidden("spec", "only cpu and memory resources are mutable")]
    for i, (was, now) in enumerate(zip(old_inits, new_inits)):
        if _sidecar(was):
            errors += _container_resize_errors(now, was, f"spec.initContainers[{i}].resources")
    for i, (was, now) in enumerate(zip(old_ctrs, new_ctrs)):
        errors += _container_resize_errors(now, was, f"spec.containers[{i}].resources")

    munged_ctrs = []
    for was, now in zip(old_ctrs, new_ctrs):
        munged = _without_cpu_memory_changes(now, was)
        if not _same_container(munged, was):
            errors.append(field_forbidden("spec", "only cpu and memory resources are mutable"))
        munged_ctrs.append(munged)
    munged_inits = []
    for was, now in zip(old_inits, new_inits):
        if _sidecar(now):
            munged = _without_cpu_memory_changes(now, was)
            if not _same_container(munged, was):
                errors.append(field_forbidden("spec", "only cpu and memory resources for sidecar containers "
                                                      "are mutable"))
        else:
            munged = now
            if not _same_container(now, was):
                errors.append(field_forbidden("spec", "resources for non-sidecar init containers are immutable"))
        munged_inits.append(munged)
    if errors:
        return errors
    rest_new = {k: v for k, v in new_spec.items() if k not in ("containers", "initContainers")}
    rest_old = {k: v for k, v in old_spec.items() if k not in ("containers", "initContainers")}
    if rest_new != rest_old or not all(_same_container(a, b) for a, b in zip(munged_ctrs + munged_inits,
                                                                          old_ctrs + old_inits)):
        errors.append(field_forbidden("spec", "only cpu and memory resources are mutable"))
    return errors
