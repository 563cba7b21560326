"""In-place Pod resize on the resources lab's nodes (InPlacePodVerticalScaling, beta and on by
default in v1.34): `labkit resources patch POD --subresource resize -p PATCH`, as `kubectl patch pod
POD --subresource resize -p PATCH` against a v1.34 cluster.

The API server's part is labkit.apiserver.podresize, the same as the embedded API server's
`pods/resize`: the patch is applied to the stored Pod, defaulted again as the lab's Pods are
(labkit.pods; SetDefaults_Pod: limits become missing requests; the resizePolicy entries it gives
requested cpu and memory are added for validation, the lab's records leave them out), its
containers validated, reduced to the
containers' resources and resizePolicy (podResizeStrategy.PrepareForUpdate), validated
(ValidatePodResize) and stored with metadata.generation raised.

The kubelet's part, for a Pod that is Pending or Running on the node:

* allocation_manager.go handlePodResourcesResize: nothing to do when the spec asks for what is
  allocated (the PodResizePending condition goes). Otherwise canResizePod (v1.34): the Pod's
  requests above the node's allocatable-absolute (capacity minus reservations; a lab node reserves
  nothing, and the eviction threshold is not subtracted) is `Infeasible` — `Node didn't have enough
  capacity: <memory|cpu>, requested: N, capacity: M`, memory looked at first; requests that do not
  fit beside the other Pods' allocated requests (the admit handlers, GeneralPredicates) is
  `Deferred` with the predicate's message. Either sets the condition PodResizePending (reason and
  message, observedGeneration) and leaves the allocation and the cgroups as they were; a deferred
  resize is tried again when a Pod leaves the node (kubelet retries pending resizes then and on
  every pod sync). A resize that fits is allocated: PodResizeInProgress is set, then actuated.
* kuberuntime_manager.go doPodResizeAction: the pod cgroup's limits are raised before the
  containers' and lowered after them (ResourceConfigForPod); each container's cgroup is updated
  (UpdateContainerResources, calculateLinuxResources); kubepods/burstable's shares follow. A
  container whose resizePolicy for a changed resource is RestartContainer is restarted instead
  (killed, its cgroup rewritten, started again: restartCount + 1, and its oom_score_adj computed
  anew as for any container start).
* Once the cgroups hold the allocation, status.containerStatuses[*].resources report it (requests
  and limits of cpu and memory) with allocatedResources (the requests), and PodResizeInProgress
  goes (the kubelet clears it once actuated and allocated resources agree). A running container's
  oom_score_adj is not rewritten by a resize.

labkit's node actuates at once, in the command that resized, so PodResizeInProgress is seen only
in the command's account of what happened, not afterwards.
"""

from __future__ import annotations

import copy
import time

from labkit.apiserver.podresize import status_resources
from labkit.errors import LabkitError

PENDING, IN_PROGRESS = "PodResizePending", "PodResizeInProgress"
DEFERRED, INFEASIBLE = "Deferred", "Infeasible"
STRATEGIC = "strategic"
PATCH_TYPES = {"strategic": "application/strategic-merge-patch+json", "merge": "application/merge-patch+json",
               "json": "application/json-patch+json"}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _resources(manifest: dict) -> dict:
    """{container: resources} of the containers a resize may change (containers and sidecars)."""
    spec = manifest.get("spec") or {}
    out = {c["name"]: copy.deepcopy(c.get("resources") or {}) for c in spec.get("containers") or []}
    out.update({c["name"]: copy.deepcopy(c.get("resources") or {}) for c in spec.get("initContainers") or []
                if c.get("restartPolicy") == "Always"})
    return out


def _policies(manifest: dict) -> dict:
    spec = _with_resize_policy(manifest).get("spec") or {}
    return {c["name"]: {p.get("resourceName"): p.get("restartPolicy") for p in c.get("resizePolicy") or []}
            for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])}


def _defaulted(node, manifest: dict) -> dict:
    """The Pod defaulted and validated as the lab's Pods are (labkit.pods: SetDefaults_Pod's
    requests from limits and resizePolicy, validatePodMetadataAndSpec's container checks);
    PodInvalid with the API server's message when it is not valid."""
    from labkit.pods import pod_from_dict
    return pod_from_dict(copy.deepcopy(manifest), f"{node.name}/{manifest['metadata']['name']}",
                         default_node=node.name, priority_classes=node.config.priority_classes).manifest


def patched_manifest(node, name: str, stored: dict, patch_text: str, patch_type: str) -> dict:
    """The API server's answer to the resize: the Pod to store, or PodInvalid with its message."""
    import json

    import yaml

    from labkit.apiserver import schema
    from labkit.apiserver.errors import ApiError, invalid
    from labkit.apiserver.patch import apply_patch
    from labkit.apiserver.podresize import prepare_resize, validate_resize
    from labkit.apiserver.registry.pod import qos_class
    from labkit.pods import PodInvalid

    if patch_type not in PATCH_TYPES:
        raise LabkitError(f"--type must be one of {', '.join(PATCH_TYPES)}, not {patch_type!r}")
    try:
        patch = json.loads(patch_text)
    except ValueError:
        try:
            patch = yaml.safe_load(patch_text)      # kubectl takes YAML too
        except yaml.YAMLError as exc:
            raise LabkitError(f"error: unable to parse {patch_text!r}: {exc}") from None
    old = _defaulted(node, stored)
    try:
        new = apply_patch(PATCH_TYPES[patch_type], copy.deepcopy(old), patch, schema.for_model("V1Pod"))
    except ApiError as exc:
        raise LabkitError(f"Error from server ({exc.reason}): {exc.message}") from None
    new = prepare_resize(_defaulted(node, new), old)
    # validated as the API server stores Pods: with SetDefaults_Pod's resizePolicy entries (the
    # lab's Pod files and records leave them out; a resize cannot change them)
    errors = validate_resize(_with_resize_policy(new), _with_resize_policy(old), qos_class, require_image=False)
    if errors:
        raise PodInvalid("The " + invalid("Pod", "", name, errors).message)
    return new


def _with_resize_policy(manifest: dict) -> dict:
    from labkit.apiserver.podresize import default_resize_policy

    out = copy.deepcopy(manifest)
    default_resize_policy(out.setdefault("spec", {}))
    return out


def _condition(kind: str, generation: int, reason: str = "", message: str = "") -> dict:
    """status_manager.go SetPodResizePendingCondition / SetPodResizeInProgressCondition."""
    condition = {"type": kind, "status": "True", "observedGeneration": generation, "lastProbeTime": None,
                 "lastTransitionTime": _now()}
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def _set_condition(record: dict, condition: dict | None, kind: str) -> None:
    conditions = [c for c in record["status"].get("conditions") or [] if c.get("type") != kind]
    if condition is not None:
        before = [c for c in record["status"].get("conditions") or [] if c.get("type") == kind]
        if before and (before[0].get("reason"), before[0].get("message")) == (condition.get("reason"),
                                                                              condition.get("message")):
            condition["lastTransitionTime"] = before[0].get("lastTransitionTime", condition["lastTransitionTime"])
        conditions.append(condition)
    if conditions:
        record["status"]["conditions"] = conditions
    else:
        record["status"].pop("conditions", None)


def _infeasible(node, pod) -> str | None:
    """canResizePod's capacity check (see the module)."""
    from labkit.pods import pod_requests

    requests = pod_requests(pod)
    memory = requests["memory"].value_int() if "memory" in requests else 0
    cpu = requests["cpu"].milli_value() if "cpu" in requests else 0
    if memory > node.config.memory_capacity:
        return f"Node didn't have enough capacity: memory, requested: {memory}, capacity: {node.config.memory_capacity}"
    if cpu > node.config.cpu_capacity_milli:
        return f"Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {node.config.cpu_capacity_milli}"
    return None


def container_status(record: dict, name: str) -> dict:
    """What status.containerStatuses[*] says of a container's resources (kubelet v1.34 reports them
    for every container that can be resized): `resources`, the values its cgroups hold, and
    `allocatedResources`, the requests allocated to it; the last resize's when there was one."""
    entry = record["containers"][name]
    if "resources" in entry:
        out = {"resources": entry["resources"]}
        if entry.get("allocatedResources"):
            out["allocatedResources"] = entry["allocatedResources"]
        return out
    allocated = record.get("allocated") or _resources(record["manifest"])
    if name not in allocated:
        return {}            # a regular init container: not resized, not reported
    requests = dict(allocated[name].get("requests") or {})
    return {"resources": status_resources(allocated[name]), **({"allocatedResources": requests} if requests else {})}


def handle(node, record: dict) -> list[str]:
    """The kubelet's handling of the Pod's resources after a resize (see the module); writes the
    record and returns what happened, a line each."""
    if record["status"]["phase"] not in ("Pending", "Running"):
        return [f"{node.name}: pod/{record['name']} is {record['status']['phase']}: the kubelet resizes nothing"]
    generation = (record["manifest"].get("metadata") or {}).get("generation") or 1
    desired = _resources(record["manifest"])
    allocated = record.get("allocated") or desired
    if allocated == desired:
        record.pop("allocated", None)
        _set_condition(record, None, PENDING)
        node._write(record)
        return []
    pod = node.pod(record)       # the spec as resized
    message = _infeasible(node, pod)
    reason = INFEASIBLE
    if message is None:
        unfit = node.resource_fit(pod)
        reason, message = (DEFERRED, unfit[1]) if unfit else ("", None)
    if message is not None:
        record["allocated"] = allocated
        _set_condition(record, _condition(PENDING, generation, reason, message), PENDING)
        node._write(record)
        return [f"{node.name}: {PENDING} {reason}: {message}"]
    lines = [f"{node.name}: resize allocated ({IN_PROGRESS}, generation {generation})"]
    _set_condition(record, None, PENDING)
    _set_condition(record, _condition(IN_PROGRESS, generation), IN_PROGRESS)
    record["allocated"] = allocated       # until actuated: a crash leaves the allocation to redo
    node._write(record)
    lines += _actuate(node, record, allocated, desired)
    record.pop("allocated", None)
    _set_condition(record, None, IN_PROGRESS)
    node._write(record)
    return lines


def _actuate(node, record: dict, before: dict, after: dict) -> list[str]:
    """doPodResizeAction (see the module)."""
    from labkit import procs
    from labkit.resources import kubelet

    old_pod, new_pod = node.allocated_pod(dict(record, allocated=before)), node.pod(record)
    old_cfg, new_cfg = kubelet.pod_cgroup(old_pod), kubelet.pod_cgroup(new_pod)

    def larger(a, b):
        if a is None or b is None:
            return None
        return max(a, b)
    # the pod cgroup never holds less than its containers while they change
    node.cgroups.apply(record["cgroup"], kubelet.CgroupSettings(
        new_cfg.cpu_shares, None if (old_cfg.cpu_quota or 0) <= 0 or (new_cfg.cpu_quota or 0) <= 0
        else larger(old_cfg.cpu_quota, new_cfg.cpu_quota), new_cfg.cpu_period,
        larger(old_cfg.memory_limit or None, new_cfg.memory_limit or None)))
    policies = _policies(record["manifest"])
    specs = {c.name: c for c in new_pod.all_containers()}
    lines = []
    for name, resources in after.items():
        entry = record["containers"][name]
        if resources == before.get(name):
            continue
        was = before.get(name) or {}
        changed = {k for which in ("requests", "limits") for k in ("cpu", "memory")
                   if (resources.get(which) or {}).get(k) != (was.get(which) or {}).get(k)}
        restart = any(policies.get(name, {}).get(k) == "RestartContainer" for k in changed)
        if restart:
            procs.remove_all({procs.owner_token(node.env, entry["tag"])})
            entry["restartCount"] = entry.get("restartCount", 0) + 1
            entry["oom_score_adj"] = kubelet.oom_score_adj(new_pod, specs[name], node.config.memory_capacity)
            node._start(new_pod, specs[name], record)
            lines.append(f"{node.name}: container {name} restarted with its new resources (resizePolicy "
                         "RestartContainer)")
        else:
            node.cgroups.apply(entry["cgroup"], kubelet.container_cgroup(new_pod, specs[name]))
            lines.append(f"{node.name}: container {name}'s cgroup updated in place")
        entry["resources"] = status_resources(resources)     # labkit.apiserver.podresize
        entry["allocatedResources"] = dict((resources.get("requests") or {}))
    node.cgroups.apply(record["cgroup"], new_cfg)
    node._update_burstable()
    return lines


def retry_pending(node) -> list[str]:
    """Deferred resizes tried again (kubelet: when a Pod leaves the node, and on pod syncs)."""
    lines = []
    for record in node.records():
        pending = [c for c in record["status"].get("conditions") or []
                   if c.get("type") == PENDING and c.get("reason") == DEFERRED]
        if pending and record.get("allocated"):
            lines += handle(node, record)
    return lines


def resize(node, name: str, patch_text: str, patch_type: str = STRATEGIC) -> list[str]:
    """The whole resize: the API server's answer, then the kubelet's (see the module)."""
    record = node.record(name)
    if record is None:
        raise LabkitError(f'Error from server (NotFound): pods "{name}" not found')
    manifest = patched_manifest(node, name, record["manifest"], patch_text, patch_type)
    stored = _defaulted(node, record["manifest"])
    if _resources(manifest) == _resources(stored) and _policies(manifest) == _policies(stored):
        return [f"pod/{name} patched (no change)"]
    if not record.get("allocated"):
        record["allocated"] = _resources(record["manifest"])
    record["manifest"] = manifest
    node._write(record)
    return [f"pod/{name} patched"] + handle(node, record)
