"""Server-side `Table` answers for `kubectl get`, with the columns kube-apiserver's printers
(pkg/printers/internalversion/printers.go) give each kind: namespaces show Status, pods show
Ready / Status (Terminating once deletionTimestamp is set) / Restarts, and so on. Kinds without a
printer get upstream's default table (Name, Created At); custom resources get Name, Age plus their
additionalPrinterColumns."""

from __future__ import annotations

import calendar
import time


def _col(name: str, type_: str = "string", fmt: str = "", priority: int = 0, description: str = "") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
AGE = _col("Age", description="CreationTimestamp is a timestamp representing the server time when this object "
                              "was created.")


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return calendar.timegm(time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    seconds = int(seconds)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m{s}s" if s else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        m = minutes % 60
        return f"{hours}h{m}m" if m else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d{h}h" if h else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y{dy}d" if dy else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(obj: dict) -> str:
    created = parse_time(obj.get("metadata", {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(time.time() - created)


def _name(obj):
    return obj.get("metadata", {}).get("name", "")


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- per-kind printers: (columns, row function) ---------------------------------------------------

def _namespace_row(obj):
    return [_name(obj), (obj.get("status") or {}).get("phase", ""), age(obj)]


def _pod_row(obj):
    """printPod (pkg/printers/internalversion/printers.go): the reason is the pod's reason or phase,
    overridden by a container's waiting or terminated reason (Completed, Error, ...); Terminating only
    while the pod is being deleted and not yet in a terminal phase."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = spec.get("containers") or []
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    restarts = sum(_int(s.get("restartCount")) for s in statuses)
    reason = status.get("reason") or status.get("phase") or ""
    ready, running = 0, False
    for s in reversed(statuses):
        state = s.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated is not None and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated is not None:
            reason = (f"Signal:{terminated['signal']}" if terminated.get("signal")
                      else f"ExitCode:{_int(terminated.get('exitCode'))}")
        elif s.get("ready") and state.get("running") is not None:
            running = True
            ready += 1
    if reason == "Completed" and running:
        ready_condition = any(c.get("type") == "Ready" and c.get("status") == "True"
                              for c in status.get("conditions") or [])
        reason = "Running" if ready_condition else "NotReady"
    if obj.get("metadata", {}).get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif status.get("phase") not in ("Succeeded", "Failed"):
            reason = "Terminating"
    return [_name(obj), f"{ready}/{len(containers)}", reason, restarts, age(obj),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>", "<none>"]


def _replicas_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [_name(obj), _int(spec.get("replicas")), _int(status.get("replicas")),
            _int(status.get("readyReplicas")), age(obj)]


def _deployment_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return [_name(obj), f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}",
            _int(status.get("updatedReplicas")), _int(status.get("availableReplicas")), age(obj)]


def _configmap_row(obj):
    return [_name(obj), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), age(obj)]


def _secret_row(obj):
    return [_name(obj), obj.get("type", ""), len(obj.get("data") or {}), age(obj)]


def _service_row(obj):
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []
                     if isinstance(p, dict)) or "<none>"
    external = ",".join(spec.get("externalIPs") or []) or "<none>"
    return [_name(obj), spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>", external, ports, age(obj)]


def _serviceaccount_row(obj):
    return [_name(obj), len(obj.get("secrets") or []), age(obj)]


def _event_row(obj):
    involved = obj.get("involvedObject") or {}
    last = parse_time(obj.get("lastTimestamp") or obj.get("eventTime") or obj.get("metadata", {}).get("creationTimestamp"))
    last_seen = "<unknown>" if last is None else human_duration(time.time() - last)
    kind = (involved.get("kind") or "").lower()
    return [last_seen, obj.get("type", ""), obj.get("reason", ""), f"{kind}/{involved.get('name', '')}",
            obj.get("message", "")]


def _crd_row(obj):
    return [_name(obj), obj.get("metadata", {}).get("creationTimestamp", "")]


def _apiservice_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    service = spec.get("service")
    svc = "Local" if not service else f"{service.get('namespace')}/{service.get('name')}"
    available = "Unknown"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Available":
            available = cond.get("status", "Unknown")
            if available != "True":
                available = f"{available} ({cond.get('reason', '')})"
    return [_name(obj), svc, available, age(obj)]


def _age_of(value: str | None) -> str:
    created = parse_time(value)
    return "<unknown>" if created is None else human_duration(time.time() - created)


def _node_row(obj):
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = meta.get("labels") or {}
    roles = sorted({k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [_name(obj), state, ",".join(roles) or "<none>", age(obj), info.get("kubeletVersion", ""),
            addresses.get("InternalIP", "<none>"), addresses.get("ExternalIP", "<none>"),
            info.get("osImage", "<unknown>"), info.get("kernelVersion", "<unknown>"),
            info.get("containerRuntimeVersion", "<unknown>")]


def access_modes(modes: list | None) -> str:
    """GetAccessModesAsString."""
    short = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
    return ",".join(short[m] for m in short if m in (modes or []))


def _pv_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    claim = spec.get("claimRef") or {}
    phase = "Terminating" if obj.get("metadata", {}).get("deletionTimestamp") else status.get("phase", "")
    return [_name(obj), (spec.get("capacity") or {}).get("storage", ""), access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), phase,
            f"{claim.get('namespace')}/{claim.get('name')}" if claim else "", spec.get("storageClassName", ""),
            spec.get("volumeAttributesClassName") or "<unset>", status.get("reason", ""), age(obj),
            spec.get("volumeMode", "")]


def _pvc_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    phase = "Terminating" if obj.get("metadata", {}).get("deletionTimestamp") else status.get("phase", "")
    return [_name(obj), phase, spec.get("volumeName", ""), (status.get("capacity") or {}).get("storage", ""),
            access_modes(status.get("accessModes")), spec.get("storageClassName", ""),
            status.get("currentVolumeAttributesClassName") or "<unset>", age(obj), spec.get("volumeMode", "")]


def _more(items: list[str], shown: int = 3) -> str:
    if not items:
        return ""
    text = ",".join(items[:shown])
    return text + (f" + {len(items) - shown} more..." if len(items) > shown else "")


def _endpoints_row(obj):
    pairs = []
    for subset in obj.get("subsets") or []:
        for address in subset.get("addresses") or []:
            for port in subset.get("ports") or [{}]:
                pairs.append(f"{address.get('ip')}:{port['port']}" if "port" in port else address.get("ip", ""))
    return [_name(obj), _more(pairs) or "<none>", age(obj)]


def _endpointslice_row(obj):
    ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    return [_name(obj), obj.get("addressType", ""), ",".join(ports) or "<unset>", _more(addresses) or "<unset>",
            age(obj)]


def _containers_images(template: dict) -> tuple[str, str]:
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _selector_text(selector) -> str:
    from labkit.apiserver.selectors import LabelSelector
    try:
        return LabelSelector.from_label_selector(selector).text() if selector is not None else "<none>"
    except ValueError:
        return "<error>"


def _job_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = "Running"
    for kind in ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Suspended"):
        if conditions.get(kind) == "True":
            state = kind
            break
    if obj.get("metadata", {}).get("deletionTimestamp"):
        state = "Terminating"
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif spec.get("parallelism") is not None and spec["parallelism"] > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    started, finished = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = "" if started is None else human_duration((finished or time.time()) - started)
    names, images = _containers_images(spec.get("template"))
    return [_name(obj), state, completions, duration, age(obj), names, images, _selector_text(spec.get("selector"))]


def _cronjob_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers_images(((spec.get("jobTemplate") or {}).get("spec") or {}).get("template"))
    last = status.get("lastScheduleTime")
    return [_name(obj), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            "True" if spec.get("suspend") else "False", len(status.get("active") or []),
            _age_of(last) if last else "<none>", age(obj), names, images,
            _selector_text(((spec.get("jobTemplate") or {}).get("spec") or {}).get("selector"))]


def _daemonset_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}
    names, images = _containers_images(spec.get("template"))
    return [_name(obj), _int(status.get("desiredNumberScheduled")), _int(status.get("currentNumberScheduled")),
            _int(status.get("numberReady")), _int(status.get("updatedNumberScheduled")),
            _int(status.get("numberAvailable")), ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
            age(obj), names, images, _selector_text(spec.get("selector"))]


def _statefulset_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers_images(spec.get("template"))
    return [_name(obj), f"{_int(status.get('readyReplicas'))}/{_int(spec.get('replicas'))}", age(obj), names, images]


def _binding_row(obj):
    ref = obj.get("roleRef") or {}
    subjects = obj.get("subjects") or []
    of_kind = lambda kind: ",".join(  # noqa: E731
        (f"{s.get('namespace')}/{s.get('name')}" if kind == "ServiceAccount" else s.get("name", ""))
        for s in subjects if s.get("kind") == kind)
    return [_name(obj), f"{ref.get('kind')}/{ref.get('name')}", age(obj), of_kind("User"), of_kind("Group"),
            of_kind("ServiceAccount")]


def _lease_row(obj):
    return [_name(obj), (obj.get("spec") or {}).get("holderIdentity", ""), age(obj)]


def _hpa_row(obj):
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    current = {(m.get("resource") or {}).get("name"): (m.get("resource") or {}).get("current") or {}
               for m in status.get("currentMetrics") or [] if m.get("type") == "Resource"}
    targets = []
    for metric in spec.get("metrics") or []:
        if metric.get("type") == "Resource":
            resource = metric.get("resource") or {}
            target, now = resource.get("target") or {}, current.get(resource.get("name"), {})
            if target.get("type") == "Utilization":
                shown = f"{now['averageUtilization']}%" if "averageUtilization" in now else "<unknown>"
                targets.append(f"{resource.get('name')}: {shown}/{target.get('averageUtilization')}%")
            else:
                shown = now.get("averageValue", "<unknown>")
                targets.append(f"{resource.get('name')}: {shown}/{target.get('averageValue')}")
        else:
            targets.append("<unknown>/<unknown>")
    shown = ", ".join(targets[:2]) + (f" + {len(targets) - 2} more..." if len(targets) > 2 else "")
    return [_name(obj), f"{ref.get('kind')}/{ref.get('name')}", shown or "<none>", _int(spec.get("minReplicas")) or 1,
            _int(spec.get("maxReplicas")), _int(status.get("currentReplicas")), age(obj)]


PRINTERS = {
    "Namespace": ([NAME, _col("Status", description="The status of the namespace"), AGE], _namespace_row),
    "Pod": ([NAME, _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
             _col("Status", description="The aggregate status of the containers in this pod."),
             _col("Restarts", "string", description="The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
             AGE, _col("IP", priority=1), _col("Node", priority=1), _col("Nominated Node", priority=1),
             _col("Readiness Gates", priority=1)], _pod_row),
    "ReplicationController": ([NAME, _col("Desired", "integer"), _col("Current", "integer"),
                               _col("Ready", "integer"), AGE], _replicas_row),
    "ReplicaSet": ([NAME, _col("Desired", "integer"), _col("Current", "integer"), _col("Ready", "integer"), AGE],
                   _replicas_row),
    "Deployment": ([NAME, _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"), AGE],
                   _deployment_row),
    "ConfigMap": ([NAME, _col("Data", "integer"), AGE], _configmap_row),
    "Secret": ([NAME, _col("Type"), _col("Data", "integer"), AGE], _secret_row),
    "Service": ([NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), AGE], _service_row),
    "ServiceAccount": ([NAME, _col("Secrets", "integer"), AGE], _serviceaccount_row),
    "Event": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")], _event_row),
    "CustomResourceDefinition": ([NAME, _col("Created At", "date")], _crd_row),
    "APIService": ([NAME, _col("Service"), _col("Available"), AGE], _apiservice_row),
    "Node": ([NAME, _col("Status", description="The status of the node"), _col("Roles"), AGE, _col("Version"),
              _col("Internal-IP", priority=1), _col("External-IP", priority=1), _col("OS-Image", priority=1),
              _col("Kernel-Version", priority=1), _col("Container-Runtime", priority=1)], _node_row),
    "PersistentVolume": ([NAME, _col("Capacity"), _col("Access Modes"), _col("Reclaim Policy"), _col("Status"),
                          _col("Claim"), _col("StorageClass"), _col("VolumeAttributesClass"), _col("Reason"), AGE,
                          _col("VolumeMode", priority=1)], _pv_row),
    "PersistentVolumeClaim": ([NAME, _col("Status"), _col("Volume"), _col("Capacity"), _col("Access Modes"),
                               _col("StorageClass"), _col("VolumeAttributesClass"), AGE, _col("VolumeMode", priority=1)],
                              _pvc_row),
    "Endpoints": ([NAME, _col("Endpoints"), AGE], _endpoints_row),
    "EndpointSlice": ([NAME, _col("AddressType"), _col("Ports"), _col("Endpoints"), AGE], _endpointslice_row),
    "Job": ([NAME, _col("Status"), _col("Completions"), _col("Duration"), AGE, _col("Containers", priority=1),
             _col("Images", priority=1), _col("Selector", priority=1)], _job_row),
    "CronJob": ([NAME, _col("Schedule"), _col("Timezone"), _col("Suspend", "boolean"), _col("Active", "integer"),
                 _col("Last Schedule"), AGE, _col("Containers", priority=1), _col("Images", priority=1),
                 _col("Selector", priority=1)], _cronjob_row),
    "DaemonSet": ([NAME, _col("Desired", "integer"), _col("Current", "integer"), _col("Ready", "integer"),
                   _col("Up-to-date", "integer"), _col("Available", "integer"), _col("Node Selector"), AGE,
                   _col("Containers", priority=1), _col("Images", priority=1), _col("Selector", priority=1)],
                  _daemonset_row),
    "StatefulSet": ([NAME, _col("Ready"), AGE, _col("Containers", priority=1), _col("Images", priority=1)],
                    _statefulset_row),
    "Role": ([NAME, _col("Created At", "date")], _crd_row),
    "ClusterRole": ([NAME, _col("Created At", "date")], _crd_row),
    "RoleBinding": ([NAME, _col("Role"), AGE, _col("Users", priority=1), _col("Groups", priority=1),
                     _col("ServiceAccounts", priority=1)], _binding_row),
    "ClusterRoleBinding": ([NAME, _col("Role"), AGE, _col("Users", priority=1), _col("Groups", priority=1),
                            _col("ServiceAccounts", priority=1)], _binding_row),
    "Lease": ([NAME, _col("Holder"), AGE], _lease_row),
    "HorizontalPodAutoscaler": ([NAME, _col("Reference"), _col("Targets"), _col("MinPods", "integer"),
                                 _col("MaxPods", "integer"), _col("Replicas", "integer"), AGE], _hpa_row),
}

DEFAULT = ([NAME, _col("Created At", "date", description="CreationTimestamp is a timestamp representing the "
                                                         "server time when this object was created.")],
           _crd_row)


def _json_path(obj, path: str):
    """The simple JSONPath subset of additionalPrinterColumns (`.spec.replicas`, `.status.x[0].y`)."""
    node = obj
    for part in path.strip().lstrip(".").split("."):
        if not part:
            continue
        index = None
        if part.endswith("]") and "[" in part:
            part, index = part[:-1].split("[", 1)
        node = node.get(part) if isinstance(node, dict) else None
        if index is not None:
            try:
                node = node[int(index)] if isinstance(node, list) else None
            except (ValueError, IndexError):
                node = None
    return node


def custom_resource_printer(printer_columns: list[dict]):
    """apiextensions-apiserver's tableconvertor: Name, then the CRD's additionalPrinterColumns
    (a CRD without any gets Age); date columns show an age."""
    printer_columns = printer_columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    columns = [NAME] + [_col(c.get("name", ""), c.get("type", "string"), c.get("format", ""), c.get("priority", 0),
                             c.get("description", "")) for c in printer_columns]

    def cell(obj, column):
        value = _json_path(obj, column.get("jsonPath", ""))
        if value is None:
            return None
        if column.get("type") == "date":
            stamp = parse_time(value) if isinstance(value, str) else None
            return human_duration(time.time() - stamp) if stamp is not None else value
        if isinstance(value, (dict, list)):
            import json
            return json.dumps(value, separators=(",", ":"))
        return value

    def row(obj):
        return [_name(obj)] + [cell(obj, c) for c in printer_columns]
    return columns, row


def build_table(printer, objects: list[dict], resource_version: str, include_object: str = "Metadata",
                with_columns: bool = True) -> dict:
    columns, row = printer
    rows = []
    for obj in objects:
        entry = {"cells": row(obj)}
        if include_object == "Object":
            entry["object"] = obj
        elif include_object != "None":
            entry["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": obj.get("metadata", {})}
        rows.append(entry)
    table = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": resource_version},
             "columnDefinitions": columns if with_columns else [], "rows": rows}
    return table
