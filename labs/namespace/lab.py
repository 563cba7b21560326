"""The namespace lab's environment: the embedded API server with the garbage collector, the
workload controllers, the node stand-in and the namespace controller, and a few namespaces with
content. Four of them are deleted at once and stay Terminating, each for its own reason.

  billing     Deployment, ConfigMap, a Secret with finalizer billing.example.com/audit   (a)
  attic       Terminating: a ConfigMap held by attic.example.com/keep                     (b)
  reports     Terminating: a Backup (custom resource) held by backup.example.com/upload   (c)
  monitoring  a ConfigMap; APIService v1beta1.metrics.k8s.io served by kube-system/metrics-server (d)
  legacy      Terminating: a ConfigMap and a Backup, both held by finalizers              (e)
  sandbox     empty                                                                       (f)
  archive     Terminating: the Pod uploader, on node-b (shut down for good), still uses the
              PersistentVolumeClaim data, Bound to the PersistentVolume archive-data      (g)

Nothing runs that would ever remove the example finalizers: like an operator that was
uninstalled before its objects were deleted.

(d) is served for real: the lab runs metrics_backend.py, an HTTPS server that answers
metrics.k8s.io discovery, as the process of the Pod of the Deployment kube-system/metrics-server
(host network, so its Pod IP is the node's address where the process listens; its container port
`https` is the port the process got). The Service selects that Pod and targets the port by name,
the EndpointSlice controller publishes it, and the API server's availability check reaches the
process through it, as kube-aggregator does.

(g) is what a node that died leaves behind: the Node node-b is NotReady (its kubelet stopped
posting status) and carries the node lifecycle controller's unreachable taints; its Pod uploader
had been Running with the claim `data` mounted and was deleted (evicted) after the node died, so
it stays Terminating — no kubelet will ever confirm it. The namespace controller deletes pods
first, so `archive` waits for it, and the claim keeps kubernetes.io/pvc-protection while the pod
exists. The claim was bound before the Pod ran: the lab creates the PersistentVolume
archive-data (static, NFS, Retain) and the claim, and the PV controller binds them
(labkit.controllers.persistentvolume; on a cluster its own); once the claim is gone the volume is
Released and kept, and a reset of the exercise makes it anew for the new claim.

With `labkit run namespace --kubeconfig FILE [--context C]` the same objects are built on a real
cluster instead, whose own namespace controller and kube-aggregator do the work. There the lab
runs no backend: the APIService points at a Service without Pods, and a real aggregator checks
endpoints as well as the Service (remote_available_controller.go: MissingEndpoints), so there it is
Available=False from the start, and every namespace deletion on that cluster waits on the failing
discovery until (d) is fixed: `access()` tells the student to do (d) first. labkit has no audit
log or decision log of a cluster: checks that need them say so and judge the live state only.
Everything is created through the ledger (labkit.apiserver.target), and `labkit cleanup
namespace` deletes it again, releasing the lab's own example finalizers.
"""

import json
import sys
import time
from pathlib import Path

from labkit import procs
from labkit.apiserver import waits
from labkit.apiserver.errors import ApiError
from labkit.apiserver.process import read_server_info, server_alive, spawn
from labkit.apiserver.target import SERVER_TAG, Target, for_env
from labkit.controllers.manager import DEFAULT_CONTROLLERS
from labkit.errors import LabkitError

OPTIONS = ("kubeconfig", "context")

CRD_NAME = "backups.example.com"
APISERVICE = "v1beta1.metrics.k8s.io"
METRICS_SERVICE = ("kube-system", "metrics-server")
# the APIService of metrics-server as the lab builds it (what a reset of broken-apiservice puts back)
APISERVICE_SPEC = {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                   "insecureSkipTLSVerify": True,
                   "service": {"namespace": METRICS_SERVICE[0], "name": METRICS_SERVICE[1], "port": 443}}
BACKEND_TAG = "metrics-server"      # the process behind the metrics-server Pod
BACKEND_PORT_FILE = "metrics-server.port"
DELETED_AT_SETUP = ("attic", "reports", "legacy", "archive")
DEAD_NODE = "node-b"
# kube-controller-manager v1.34 runs the taint-eviction controller (cmd/kube-controller-manager/app/
# core.go newTaintEvictionControllerDescriptor; its feature gate SeparateTaintEvictionController is GA
# and locked on in 1.34, pkg/features/kube_features.go): a Pod that does not tolerate a node's NoExecute
# taint (the out-of-service mark of volume-in-use) is deleted
CONTROLLERS = (*DEFAULT_CONTROLLERS, "tainteviction")
BUILT_FILE = "built.json"       # each namespace's resourceVersion right after the lab made it

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": CRD_NAME},
       "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "backups", "singular": "backup", "kind": "Backup"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                                             "x-kubernetes-preserve-unknown-fields": True}}}]}}


def _deployment(name: str, replicas: int = 1) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": 2,
                                           "containers": [{"name": name, "image": "nginx:1.27"}]}}}}


def _cm(name: str, finalizers=None, data=None) -> dict:
    meta = {"name": name}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {"example": "yes"}}


def _backup(name: str, finalizers) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Backup", "metadata": {"name": name, "finalizers": finalizers},
            "spec": {"schedule": "@daily", "target": "s3://example-backups/" + name}}


CONTENT = {
    "billing": [("apps/v1", "deployments", _deployment("invoices")),
                ("v1", "configmaps", _cm("rates", data={"vat": "0.2"})),
                ("v1", "secrets", {"apiVersion": "v1", "kind": "Secret",
                                   "metadata": {"name": "ledger-key", "finalizers": ["billing.example.com/audit"]},
                                   "stringData": {"key": "s3cr3t"}})],
    "attic": [("v1", "configmaps", _cm("keepsake", ["attic.example.com/keep"]))],
    "reports": [("apps/v1", "deployments", _deployment("renderer")),
                ("v1", "configmaps", _cm("templates")),
                ("example.com/v1", "backups", _backup("nightly", ["backup.example.com/upload"]))],
    "monitoring": [("v1", "configmaps", _cm("dashboards"))],
    "legacy": [("v1", "configmaps", _cm("app-config", ["legacy.example.com/keep"])),
               ("example.com/v1", "backups", _backup("weekly", ["backup.example.com/upload"]))],
    "sandbox": [],
    # storageClassName "": the claim asks for a volume of no class, as a statically provisioned
    # one is (DefaultStorageClass admission and the PV controller's retroactive default class leave
    # a claim that names a class, even "", as it is)
    "archive": [("v1", "persistentvolumeclaims",
                 {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                  "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                           "resources": {"requests": {"storage": "1Gi"}}}}),
                ("v1", "pods",
                 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "uploader", "labels": {"app": "uploader"}},
                  "spec": {"nodeName": DEAD_NODE, "containers": [{"name": "uploader", "image": "busybox:1.36",
                                                                  "command": ["sleep", "infinity"],
                                                                  "volumeMounts": [{"name": "data",
                                                                                    "mountPath": "/data"}]}],
                           "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})],
}


# (g) the volume behind the claim `data`: an administrator's NFS export (network storage, which
# outlives the node that mounted it), provisioned statically: no class, no claimRef, the reclaim
# policy left to its default (Retain, SetDefaults_PersistentVolume). The PV controller binds the
# claim to it (labkit.controllers.persistentvolume; on a cluster, its own).
VOLUME = "archive-data"
VOLUME_OBJECT = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": VOLUME},
                 "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                          "nfs": {"server": "nfs.example.com", "path": "/exports/archive/data"}}}


def _volume(env, t: Target) -> None:
    """(g) the PersistentVolume, made again when it is gone or is no longer the lab's: bound to a
    claim that is gone (Released, its claimRef kept: a new claim `data` would never bind to it),
    being deleted, or changed. Deleting it waits for kubernetes.io/pv-protection, which its
    controller removes once the volume is not Bound."""
    c = t.client()
    found = c.get_or_none("v1", "persistentvolumes", VOLUME)
    if found is not None and _volume_as_built(found) and not (found.get("spec") or {}).get("claimRef"):
        return
    if found is not None:
        _delete_and_wait(c, "v1", "persistentvolumes", VOLUME, None)
    t.create(env, "v1", "persistentvolumes", VOLUME_OBJECT)


def _volume_as_built(volume: dict) -> bool:
    """Whether the PersistentVolume is the lab's as it made it, but for what the PV controller and
    the PV protection controller write (claimRef, bound-by-controller, pv-protection, status)."""
    spec, meta = volume.get("spec") or {}, volume["metadata"]
    return not meta.get("deletionTimestamp") and spec.get("persistentVolumeReclaimPolicy") == "Retain" \
        and all(spec.get(k) == v for k, v in VOLUME_OBJECT["spec"].items()) and not meta.get("labels") \
        and set(meta.get("annotations") or {}) <= {"pv.kubernetes.io/bound-by-controller"} \
        and meta.get("finalizers") == ["kubernetes.io/pv-protection"]


def _dead_node(env, t: Target) -> None:
    """(g) the Node node-b as the node lifecycle controller leaves a node whose kubelet stopped posting:
    its conditions Unknown, and the unreachable taints the controller (which the server runs) keeps
    on it for that (doNoScheduleTaintingPass, doNoExecuteTaintingPass). The not-ready taint that
    admission gave it at creation (TaintNodesByCondition) the controller takes off again."""
    t.create(env, "v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": DEAD_NODE, "labels": {"kubernetes.io/hostname": DEAD_NODE, "kubernetes.io/os": "linux"}},
        "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": effect}
                            for effect in ("NoSchedule", "NoExecute")]}})
    message = "Kubelet stopped posting node status."
    client = t.client()
    for attempt in range(10):       # the node lifecycle controller writes the Node's taints meanwhile
        node = client.get("v1", "nodes", DEAD_NODE)
        try:
            client.update("v1", "nodes", dict(node, status=_dead_node_status(node, message)), subresource="status")
            return
        except ApiError as exc:
            if exc.code != 409 or attempt == 9:
                raise


def _dead_node_status(node: dict, message: str) -> dict:
    """node-b's status as a cluster shows it once its kubelet stopped posting: what the kubelet
    posted last — capacity and allocatable (kubelet_node_status.go setNodeStatus; `kubectl describe
    node` computes its percentages from allocatable), addresses, nodeInfo — and each condition
    Unknown, NodeStatusUnknown, with the lastHeartbeatTime of the kubelet's last post (the Node's
    registration: no heartbeat is older than the Node) and the lastTransitionTime of the moment
    the node lifecycle controller gave up on it (node_lifecycle_controller.go tryUpdateNodeHealth,
    once nodeMonitorGracePeriod had passed: now, as the lab builds it)."""
    from labkit.apiserver.timestamps import now_rfc3339

    registered = node["metadata"].get("creationTimestamp") or now_rfc3339()
    resources = {"cpu": "2", "memory": "4030100Ki", "ephemeral-storage": "20470Mi", "pods": "110"}
    return {"conditions": [{"type": kind, "status": "Unknown", "reason": "NodeStatusUnknown", "message": message,
                            "lastHeartbeatTime": registered, "lastTransitionTime": max(registered, now_rfc3339())}
                           for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
            "capacity": dict(resources), "allocatable": dict(resources),
            "addresses": [{"type": "InternalIP", "address": "10.89.0.3"}, {"type": "Hostname", "address": DEAD_NODE}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"kubeletVersion": "v1.34.1", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.27",
                         "osImage": "Ubuntu 24.04.2 LTS", "kernelVersion": "6.8.0-60-generic",
                         "machineID": "", "systemUUID": "", "bootID": ""}}


def _strand_uploader(t: Target) -> None:
    """(g) the uploader had been Running on node-b, then was deleted (evicted) once the node died."""
    c = t.client()
    # the claim was bound before the Pod could start (a Pod whose claim is unbound is not
    # scheduled: the VolumeBinding plugin's "pod has unbound immediate PersistentVolumeClaims")
    # (at once, or, when the controller met the claim before the volume, on its next resync: every
    # 15 s, labkit.controllers.persistentvolume SYNC_PERIOD, as upstream's)
    _wait(lambda: ((c.get("v1", "persistentvolumeclaims", "data", "archive").get("status") or {}).get("phase")
                   == "Bound"), f"the claim archive/data to be bound to PersistentVolume {VOLUME}", timeout=45)
    pod = c.get("v1", "pods", "uploader", "archive")
    pod["status"] = {"phase": "Running", "podIP": "10.244.77.7", "podIPs": [{"ip": "10.244.77.7"}],
                     "hostIP": "10.89.0.3", "conditions": [{"type": "Ready", "status": "False"}]}
    c.update("v1", "pods", pod, "archive", "status")
    c.delete("v1", "pods", "uploader", "archive")


def server_dir(env) -> Path:
    return Path(env.dir) / SERVER_TAG


def target(env) -> Target:
    """Where the lab's objects live: the embedded server, or the cluster of --kubeconfig."""
    return for_env(env, "namespace")


def client(env):
    return target(env).client()


def up(env):
    if env.options.get("kubeconfig"):
        t = Target(Path(env.options["kubeconfig"]), env.options.get("context"))
        env.log(f"using the cluster of {t.kubeconfig}")
    else:
        spawn(env, SERVER_TAG, controllers=CONTROLLERS)
        t = target(env)
    c = t.client()
    t.create(env, "apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
    _wait(lambda: c.request("GET", "/apis/example.com/v1")[0] == 200, "the Backup CRD to be served")
    _dead_node(env, t)
    _volume(env, t)
    uids, versions = {}, {}
    for ns in CONTENT:
        uids[ns], versions[ns] = _build_namespace(env, t, ns)
    # (d) after the namespaces: on a cluster, a namespace of the lab from before that is still being
    # deleted would otherwise wait for the unavailable APIService, and the build for it
    if t.embedded:
        _metrics_process(env)
    _metrics_apiservice(env, t)
    if t.embedded:      # the server starts its controllers once it listens, one by one: the PV
        # controller binds the claim before the uploader is shown Running, and the namespace
        # controller runs before the deletions, as on a running cluster
        read_server_info(server_dir(env)).wait_controllers(["persistentvolume-binder", "namespace"],
                                                           log=Path(env.dir) / "logs" / f"{SERVER_TAG}.log")
    _strand_uploader(t)
    for ns in DELETED_AT_SETUP:
        c.delete("v1", "namespaces", ns, options={"propagationPolicy": "Background"})

    def reported(ns: str) -> bool:      # gone, or with the conditions of the controller's first pass
        found = c.get_or_none("v1", "namespaces", ns)
        return found is None or bool((found.get("status") or {}).get("conditions"))
    _wait(lambda: all(reported(ns) for ns in DELETED_AT_SETUP),
          f"the namespace controller to report on the deleted namespaces {', '.join(DELETED_AT_SETUP)}", timeout=60.0)
    (Path(env.dir) / BUILT_FILE).write_text(json.dumps({"resourceVersions": versions,
                                                       "localAPIServices": _local_apiservices(c)}, indent=2) + "\n")
    (Path(env.dir) / "namespaces.json").write_text(json.dumps(uids, indent=2) + "\n")
    env.log("namespaces " + ", ".join(CONTENT) + f" created on {t.description}; {', '.join(DELETED_AT_SETUP)} deleted")


def _local_apiservices(c) -> list[dict]:
    """The APIServices of the API server's own groups (no spec.service: Local), as the lab found
    them: (d) may delete only the broken one, and its reset makes again any of these that is gone
    (kube-aggregator's autoregister controller creates a built-in one only once per start,
    autoregister_controller.go checkAPIService, case 2B)."""
    return [{"metadata": {"name": a["metadata"]["name"], "labels": a["metadata"].get("labels") or {}},
             "spec": a.get("spec") or {}}
            for a in c.list("apiregistration.k8s.io/v1", "apiservices")[0] if not (a.get("spec") or {}).get("service")]


def _missing_local_apiservices(env, c) -> list[dict]:
    try:
        recorded = json.loads((Path(env.dir) / BUILT_FILE).read_text()).get("localAPIServices") or []
    except (OSError, ValueError):
        return []
    have = {a["metadata"]["name"] for a in c.list("apiregistration.k8s.io/v1", "apiservices")[0]}
    return [a for a in recorded if a["metadata"]["name"] not in have]


def _build_namespace(env, t: Target, ns: str) -> tuple[str, str]:
    """Create namespace `ns` with its content; its UID and resourceVersion right after it was made
    (deleting the ones that start Terminating is the caller's part)."""
    created = t.create(env, "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for api_version, resource, obj in CONTENT[ns]:
        if resource == "pods":      # admitted only once the namespace has its default ServiceAccount
            waits.default_service_account(t.client(), ns)
        t.create(env, api_version, resource, obj, ns)
    return created["metadata"]["uid"], created["metadata"]["resourceVersion"]


def _metrics_process(env) -> None:
    """Start the metrics-server process (see the docstring); its port goes to BACKEND_PORT_FILE."""
    from labkit.controllers.node import HOST_IP
    port_file = Path(env.dir) / BACKEND_PORT_FILE
    port_file.unlink(missing_ok=True)
    procs.spawn(env, BACKEND_TAG, [sys.executable, str(Path(__file__).with_name("metrics_backend.py")),
                                   "--address", HOST_IP, "--pki", str(Path(env.dir) / "metrics-server-pki"),
                                   "--port-file", str(port_file)])
    _wait(port_file.exists, "the metrics-server process to listen")


def _metrics_apiservice(env, t: Target) -> None:
    """(d) on the embedded server the Deployment whose Pod the metrics-server process is; on both
    the Service kube-system/metrics-server and the APIService it serves."""
    c = t.client()
    if t.embedded:
        port = int((Path(env.dir) / BACKEND_PORT_FILE).read_text())
        labels = {"k8s-app": "metrics-server"}
        t.create(env, "apps/v1", "deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": METRICS_SERVICE[1], "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"hostNetwork": True, "containers": [{
                                      "name": "metrics-server",
                                      "image": "registry.k8s.io/metrics-server/metrics-server:v0.8.0",
                                      "args": [f"--secure-port={port}", "--kubelet-insecure-tls"],
                                      "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"}]}]}}}},
                 METRICS_SERVICE[0])
    t.create(env, "v1", "services", {"apiVersion": "v1", "kind": "Service",
                                     "metadata": {"name": METRICS_SERVICE[1], "labels": {"k8s-app": "metrics-server"}},
                                     "spec": {"selector": {"k8s-app": "metrics-server"},
                                              "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}},
             METRICS_SERVICE[0])
    t.create(env, "apiregistration.k8s.io/v1", "apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": dict(APISERVICE_SPEC, service=dict(APISERVICE_SPEC["service"]))})
    if t.embedded:
        _wait(lambda: apiservice_available(c), f"APIService {APISERVICE} to be Available")


# which namespace each exercise works on
EXERCISE_NAMESPACES = {"conditions": "billing", "terminating-create": "attic", "release-finalizer": "reports",
                       "broken-apiservice": "monitoring", "force-finalize": "legacy", "own-finalizer": "sandbox",
                       "volume-in-use": "archive"}


OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def _other_nodes_marked(c) -> list[dict]:
    """The nodes other than the dead one that carry the out-of-service taint (volume-in-use marks
    only node-b; its reset takes the mark off the others)."""
    return [n for n in c.list("v1", "nodes")[0] if n["metadata"]["name"] != DEAD_NODE
            and any(x.get("key") == OUT_OF_SERVICE for x in (n.get("spec") or {}).get("taints") or [])]


def reset_exercise(env, exercise_id: str) -> None:
    """Build one exercise's namespace afresh: everything stored under its name goes (finalizers
    released, the namespace finalized once it is empty), then it is made again as `labkit run`
    makes it. For broken-apiservice, the metrics-server Deployment, Service and APIService come
    back too; for volume-in-use, the dead node node-b and the Pod stranded on it. For
    release-finalizer, a CRD backups.example.com whose names or versions were changed gets the
    lab's back, a deleted (or Terminating) one is made again, and the
    other namespaces whose Backups that took with it (or whose Backups were changed) are built
    again too: their exercises' namespaces are rebuilt, as `student_work` says before the reset.
    Answer files are never touched."""
    t = target(env)
    c = t.client()
    extra = []
    if exercise_id == "release-finalizer":
        if _crd_changed(c):
            _restore_crd_spec(c)
        extra = _damaged_backup_namespaces(c, EXERCISE_NAMESPACES[exercise_id])
        if _crd_damaged(c):
            _repair_crd(env, t)
    _rebuild(env, t, exercise_id)
    for ns in extra:
        other = next(ex for ex, name in EXERCISE_NAMESPACES.items() if name == ns)
        _rebuild(env, t, other)
        # that exercise's part starts afresh too: its checks read the audit log from now on, not
        # the finalize request with which _empty removed the old namespace
        env.state.set_ready([other])


def _crd_damaged(c) -> bool:
    crd = c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME)
    return crd is None or bool(crd["metadata"].get("deletionTimestamp"))


def _crd_changed(c) -> bool:
    """The CRD stands, but its spec is not the lab's in what serves the Backups: its group,
    scope, names, or a version's name, served, storage or schema (a version no longer served
    hides every Backup from the API and from the namespace controller)."""
    crd = c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME)
    if crd is None or crd["metadata"].get("deletionTimestamp"):
        return False
    spec, want = crd.get("spec") or {}, CRD["spec"]
    if any(spec.get(key) != want[key] for key in ("group", "scope")):
        return True
    if {key: (spec.get("names") or {}).get(key) for key in want["names"]} != want["names"]:
        return True
    versions = spec.get("versions") or []
    return len(versions) != len(want["versions"]) or any(
        {key: version.get(key) for key in wanted} != wanted for version, wanted in zip(versions, want["versions"]))


def _restore_crd_spec(c) -> None:
    """Put the lab's names and versions back into the CRD (a merge patch replaces the list of
    versions whole) and wait until its Backups are served again."""
    spec = CRD["spec"]
    try:
        c.patch("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME,
                {"spec": {"names": spec["names"], "versions": spec["versions"]}}, "merge")
    except ApiError as exc:
        raise LabkitError(f"cannot put the CustomResourceDefinition {CRD_NAME} back as the lab built it "
                          f"({exc}): `labkit reset namespace` rebuilds the whole lab") from exc
    _wait(lambda: c.request("GET", "/apis/example.com/v1/backups")[0] == 200, "the Backup CRD to be served")


def _lab_backups():
    """(namespace, name, finalizers) of every Backup the lab builds."""
    return [(ns, obj["metadata"]["name"], list(obj["metadata"].get("finalizers") or []))
            for ns, content in CONTENT.items() for _v, resource, obj in content if resource == "backups"]


def _damaged_backup_namespaces(c, except_ns: str) -> list[str]:
    """The namespaces other than `except_ns` whose Backups are not as the lab built them (gone,
    finalizers changed, being deleted in a namespace the lab built Active): a deleted CRD takes
    them all."""
    damaged = []
    crd_ok = not _crd_damaged(c)
    for ns, name, finalizers in _lab_backups():
        if ns == except_ns or ns in damaged:
            continue
        found = c.get_or_none("example.com/v1", "backups", name, ns) if crd_ok else None
        if found is None or (found["metadata"].get("deletionTimestamp") and ns not in DELETED_AT_SETUP) \
                or list(found["metadata"].get("finalizers") or []) != finalizers:
            damaged.append(ns)
    return damaged


def _repair_crd(env, t: Target) -> None:
    """A CRD being deleted waits for its custom resources, and those for their finalizers: release
    the lab's example finalizers on every Backup left, let the CRD go, and make it again."""
    c = t.client()
    if c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME) is not None:
        def released():
            try:
                items = c.list("example.com/v1", "backups")[0]
            except ApiError:
                items = []
            for item in items:
                meta = item["metadata"]
                keep = [f for f in meta.get("finalizers") or [] if not f.endswith(".example.com/upload")]
                if keep != list(meta.get("finalizers") or []):
                    try:
                        c.patch("example.com/v1", "backups", meta["name"], {"metadata": {"finalizers": keep or None}},
                                "merge", meta["namespace"])
                    except ApiError as exc:
                        if exc.code != 404:
                            raise
            return c.get_or_none("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME) is None
        _wait(released, f"the CustomResourceDefinition {CRD_NAME} to go", timeout=60)
    t.create(env, "apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
    _wait(lambda: c.request("GET", "/apis/example.com/v1")[0] == 200, "the Backup CRD to be served")


def _rebuild(env, t: Target, exercise_id: str) -> None:
    ns = EXERCISE_NAMESPACES[exercise_id]
    c = t.client()
    if exercise_id == "broken-apiservice":
        for api_version, resource, name, namespace in (
                ("apiregistration.k8s.io/v1", "apiservices", APISERVICE, None),
                ("v1", "services", METRICS_SERVICE[1], METRICS_SERVICE[0]),
                ("apps/v1", "deployments", METRICS_SERVICE[1], METRICS_SERVICE[0])):
            _delete_and_wait(c, api_version, resource, name, namespace)
        for local in _missing_local_apiservices(env, c):
            try:
                c.create("apiregistration.k8s.io/v1", "apiservices",
                         {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", **local})
            except ApiError as exc:
                if exc.code != 409:
                    raise
        _metrics_apiservice(env, t)
    if exercise_id == "volume-in-use":
        _delete_and_wait(c, "v1", "nodes", DEAD_NODE, None)
        for node in _other_nodes_marked(c):
            taints = [x for x in node["spec"]["taints"] if x.get("key") != OUT_OF_SERVICE]
            c.patch("v1", "nodes", node["metadata"]["name"], {"spec": {"taints": taints or None}}, "merge")
    _empty(c, ns)
    if exercise_id == "volume-in-use":
        _dead_node(env, t)
        _volume(env, t)
    uid, version = _build_namespace(env, t, ns)
    if ns == "archive":
        _strand_uploader(t)
    if ns in DELETED_AT_SETUP:
        c.delete("v1", "namespaces", ns, options={"propagationPolicy": "Background"})
    for name, value in ((BUILT_FILE, version), ("namespaces.json", uid)):
        path = Path(env.dir) / name
        data = json.loads(path.read_text())
        (data["resourceVersions"] if name == BUILT_FILE else data)[ns] = value
        path.write_text(json.dumps(data, indent=2) + "\n")
    env.log(f"exercise {exercise_id}: namespace {ns} built afresh")


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before `labkit reset namespace [EXERCISE]`: a try that showed terminating-create's refusal (a
    create into attic, or one refused in any namespace being terminated, since the exercise was
    built) is kept (labkit.predictions.keep_trial): a reset builds attic afresh and the check reads
    the audit log from then on, and a prediction written after the try must not count because of it."""
    if exercise_id not in (None, "terminating-create"):
        return []
    from labkit import predictions
    from labkit.exercises import CheckContext
    exercise = env.lab.exercise("terminating-create")
    try:
        tries = env.lab._load("checks.py").observe_terminating_create_tries(CheckContext(env, exercise),
                                                                              exercise.params["namespace"])
    except (LabkitError, ApiError, OSError):
        return []
    if not tries:
        return []
    kept = predictions.keep_trial(env.lab.id, exercise.id, tries[0])
    return [predictions.trial_note(exercise.id, f"labkit keeps that you tried terminating-create's create yourself "
                                   f"({kept['what']}, at {kept['time']}): a prediction written or changed after "
                                   "that earns no points, after this reset too (unless --forget-prediction "
                                   "forgets it)")]


def student_work(env, exercise_id: str | None) -> list[str]:
    """What a reset of `exercise_id` (None: the whole lab) would revert of the student's work in
    the live lab, one phrase each. Answer files are never reverted (not listed)."""
    try:
        c = client(env)
        c.request("GET", "/api")
    except (LabkitError, ApiError, OSError):
        return []
    exercises = list(EXERCISE_NAMESPACES) if exercise_id is None else [exercise_id]
    out = []
    for ex in exercises:
        out += _work_in(env, c, ex)
    if exercise_id == "release-finalizer":
        if _crd_damaged(c):
            out.append(f"the CustomResourceDefinition {CRD_NAME} you deleted (it is made again)")
        changed = _crd_changed(c)
        if changed:
            out.append(f"the CustomResourceDefinition {CRD_NAME} you changed (its names and versions are put back)")
        # while the CRD is changed its Backups may not be served: the reset looks at them once it
        # has put the CRD back, and rebuilds the namespaces whose Backups are not as built then
        for ns in [] if changed else _damaged_backup_namespaces(c, EXERCISE_NAMESPACES[exercise_id]):
            other = next(ex for ex, name in EXERCISE_NAMESPACES.items() if name == ns)
            out.append(f"namespace {ns} of exercise {other}, whose Backups went with the CRD or were changed: it is "
                       "built again too")
            out += [f"{phrase} (exercise {other})" for phrase in _work_in(env, c, other)]
    elif exercise_id is None and _crd_damaged(c):
        out.append(f"the CustomResourceDefinition {CRD_NAME} you deleted (it is made again)")
    return list(dict.fromkeys(out))


def _work_in(env, c, exercise_id: str) -> list[str]:
    """The changes to one exercise's part of the lab since it was built."""
    ns = EXERCISE_NAMESPACES[exercise_id]
    out = []
    live = c.get_or_none("v1", "namespaces", ns)
    if live is None:
        out.append(f"namespace {ns} is gone: it is built again")
    elif live["metadata"]["uid"] != original_uid(env, ns):
        out.append(f"namespace {ns} you made anew (with what is in it now): it is replaced by the lab's")
    else:
        if live["metadata"].get("finalizers"):
            out.append(f"the finalizers you put into metadata.finalizers of namespace {ns} "
                       f"({', '.join(live['metadata']['finalizers'])}): they are removed")
        if ns not in DELETED_AT_SETUP and live["metadata"].get("deletionTimestamp"):
            out.append(f"your deletion of namespace {ns}: it is built again, Active")
        elif live["metadata"].get("resourceVersion") != built_resource_version(env, ns) and \
                list((live.get("spec") or {}).get("finalizers") or []) != ["kubernetes"]:
            out.append(f"the spec.finalizers you set on namespace {ns}")
        elif exercise_id == "own-finalizer" and live["metadata"].get("resourceVersion") != built_resource_version(env, ns):
            out.append(f"your changes to namespace {ns} (its finalize requests)")
        for api_version, resource, obj in CONTENT[ns]:
            built = list(obj["metadata"].get("finalizers") or [])
            if not built:
                continue
            name = obj["metadata"]["name"]
            try:
                found = c.get_or_none(api_version, resource, name, ns)
            except ApiError:
                found = None
            if found is None:
                out.append(f"{resource} {ns}/{name}, which you released or deleted: it is made again")
            elif list(found["metadata"].get("finalizers") or []) != built:
                out.append(f"the finalizers you changed on {resource} {ns}/{name}")
    if exercise_id == "broken-apiservice":
        apiservice = c.get_or_none("apiregistration.k8s.io/v1", "apiservices", APISERVICE)
        if apiservice is None:
            out.append(f"the APIService {APISERVICE} you deleted (it is made again)")
        elif any((apiservice.get("spec") or {}).get(k) != v for k, v in APISERVICE_SPEC.items()):
            out.append(f"your changes to the APIService {APISERVICE} (it is made again as the lab builds it)")
        missing = [a["metadata"]["name"] for a in _missing_local_apiservices(env, c)]
        if missing:
            out.append(f"the {len(missing)} APIService(s) of the API server's own groups you deleted "
                       f"({', '.join(missing[:3])}{', …' if len(missing) > 3 else ''}): they are made again")
        svc = c.get_or_none("v1", "services", METRICS_SERVICE[1], METRICS_SERVICE[0])
        if svc is None or (svc.get("spec") or {}).get("selector") != {"k8s-app": "metrics-server"} or \
                [(p.get("port"), p.get("targetPort")) for p in (svc.get("spec") or {}).get("ports") or []] != [(443, "https")]:
            out.append(f"the Service {'/'.join(METRICS_SERVICE)} as you left it (deleted or changed): the lab's is made again")
        dep = c.get_or_none("apps/v1", "deployments", METRICS_SERVICE[1], METRICS_SERVICE[0])
        if _embedded(env) and (dep is None or (dep.get("spec") or {}).get("replicas") != 1):
            out.append(f"the Deployment {'/'.join(METRICS_SERVICE)} as you left it (deleted or scaled)")
    if exercise_id == "volume-in-use":
        node = c.get_or_none("v1", "nodes", DEAD_NODE)
        if node is None:
            out.append(f"the Node {DEAD_NODE} you deleted (it is made again, NotReady)")
        else:
            taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
            if taints != {"node.kubernetes.io/unreachable"}:
                out.append(f"the taints you changed on node {DEAD_NODE}")
            if (node.get("spec") or {}).get("unschedulable"):
                out.append(f"your cordon of node {DEAD_NODE}")
        for other in _other_nodes_marked(c):
            out.append(f"the out-of-service taint you put on node {other['metadata']['name']} (it is taken off)")
        volume = c.get_or_none("v1", "persistentvolumes", VOLUME)
        if volume is None:
            out.append(f"the PersistentVolume {VOLUME} you deleted (it is made again)")
        elif volume["metadata"].get("deletionTimestamp"):
            out.append(f"your deletion of PersistentVolume {VOLUME} (it is made again)")
        elif not _volume_as_built(volume):
            out.append(f"your changes to PersistentVolume {VOLUME} (it is made again)")
    return out


def _embedded(env) -> bool:
    return not env.options.get("kubeconfig")


def _delete_and_wait(c, api_version: str, resource: str, name: str, namespace: str | None) -> None:
    try:
        c.delete(api_version, resource, name, namespace, options={"propagationPolicy": "Foreground"}
                 if resource == "deployments" else None)
    except ApiError as exc:
        if exc.code != 404:
            raise
    _wait(lambda: c.get_or_none(api_version, resource, name, namespace) is None, f"{resource} {name} to go")


def _empty(c, ns: str) -> None:
    """Remove namespace `ns` and everything stored under its name, now. The namespace is made
    Terminating first: while it is Active, its controllers would recreate the default
    ServiceAccount and kube-root-ca.crt, and while it does not exist, NamespaceLifecycle refuses the
    updates that release finalizers (so a namespace force-finalized earlier is made again)."""
    if c.get_or_none("v1", "namespaces", ns) is None:
        c.create("v1", "namespaces", {"metadata": {"name": ns}})
    current = c.get_or_none("v1", "namespaces", ns)
    if current is not None and not current["metadata"].get("deletionTimestamp"):
        c.delete("v1", "namespaces", ns, options={"propagationPolicy": "Background"})

    def stored():
        found = c.discover()
        return [(r.api_version, r.resource, item["metadata"]["name"]) for r in found.resources
                if r.namespaced and "list" in r.verbs and "delete" in r.verbs and found.preferred.get(r.group) == r.version
                for item in c.list(r.api_version, r.resource, ns)[0]]

    def delete_stored():
        left = stored()
        for api_version, resource, name in left:
            for write in (lambda: c.patch(api_version, resource, name, {"metadata": {"finalizers": None}}, "merge", ns),
                          lambda: c.delete(api_version, resource, name, ns,
                                           options={"gracePeriodSeconds": 0, "propagationPolicy": "Background"})):
                try:
                    write()
                except ApiError as exc:
                    if exc.code != 404:
                        raise
        return not left
    _wait(delete_stored, f"the objects stored under {ns} to go")
    current = c.get_or_none("v1", "namespaces", ns)
    if current is not None:
        current.setdefault("spec", {})["finalizers"] = []
        try:
            c.update("v1", "namespaces", current, subresource="finalize")
            if current["metadata"].get("finalizers"):
                # finalizers a patch put into the namespace's metadata (the lab builds none): nothing
                # else removes them, and the namespace would never go
                c.patch("v1", "namespaces", ns, {"metadata": {"finalizers": None}}, "merge")
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
    _wait(lambda: c.get_or_none("v1", "namespaces", ns) is None, f"namespace {ns} to go")


def uninstall_metrics_server(env):
    """What broken-apiservice's prompt has the student do, and what each step shows before the
    next (the reference solution and the common mistakes start from here): delete the Service
    kube-system/metrics-server; once kube-aggregator reports APIService v1beta1.metrics.k8s.io
    Available=False (`kubectl get apiservice`), delete the namespace monitoring; then wait until the
    namespace controller reports the failing discovery in its conditions. The client.

    The namespace is deleted only after the aggregator noticed: a namespace controller pass that
    still finds discovery working deletes monitoring's content and finalizes it at once, and such
    a pass can come right after the deletion — the work queue keeps the earlier of two AddAfter
    times, and a pass queued when the reset deleted the namespace before may be due any moment
    (namespace_controller.go enqueueNamespace; client-go delaying_queue.go) — while the
    availability controller can still be busy with a discovery check."""
    c = client(env)
    try:
        c.delete("v1", "services", METRICS_SERVICE[1], METRICS_SERVICE[0])
    except ApiError as exc:         # already deleted by hand
        if exc.code != 404:
            raise
    _wait(lambda: not apiservice_available(c), f"APIService {APISERVICE} to be reported unavailable", timeout=60)
    namespace = EXERCISE_NAMESPACES["broken-apiservice"]
    c.delete("v1", "namespaces", namespace, options={"propagationPolicy": "Background"})

    def discovery_failed():
        ns = c.get_or_none("v1", "namespaces", namespace) or {}
        return any(x.get("type") == "NamespaceDeletionDiscoveryFailure" and x.get("status") == "True"
                   for x in (ns.get("status") or {}).get("conditions") or [])
    _wait(discovery_failed, f"the namespace controller to report the failing discovery of namespace {namespace}",
          timeout=60)
    return c


def apiservice_available(c) -> bool:
    svc = c.get_or_none("apiregistration.k8s.io/v1", "apiservices", APISERVICE) or {}
    return any(x.get("type") == "Available" and x.get("status") == "True"
               for x in (svc.get("status") or {}).get("conditions") or [])


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise LabkitError(f"timed out waiting for {what}")


def is_up(env):
    if not (Path(env.dir) / "namespaces.json").exists():
        return False
    if env.options.get("kubeconfig"):
        try:
            return client(env).request("GET", "/api")[0] == 200
        except (LabkitError, ApiError, OSError):
            return False
    return server_alive(server_dir(env)) and procs.alive(env, BACKEND_TAG)


def access(env):
    t = target(env)
    follow = ("labkit ns log -f                 # the namespace controller's decisions, with reasons\n"
              if t.embedded else
              "# on a real cluster labkit has no audit log or namespace-controller log: checks that need\n"
              "# them say so and judge the live state only\n")
    first = "" if t.embedded else f"""
On a real cluster the APIService {APISERVICE} is Available=False from the start:
its Service has no Pods behind it, and a real kube-aggregator checks endpoints too. While it is,
every namespace deletion waits on the failing discovery, so work exercise broken-apiservice first.
"""
    context = f"   # context {t.context}: kubectl --context {t.context} ..." if t.context else ""
    return f"""## Your cluster

The namespaces live on {t.description if t.embedded else f"your cluster ({t.kubeconfig}), with its own controllers"}.

```sh
export KUBECONFIG={t.kubeconfig}{context}
kubectl get namespaces
labkit ns explain attic          # why a namespace is still Terminating
{follow}```
{first}"""


def finalize(env, namespace: str, finalizers: list[str]) -> None:
    """What the prompts show: `kubectl get ns NAME -o json`, set spec.finalizers, `kubectl replace
    --raw /api/v1/namespaces/NAME/finalize -f -`; run again when the namespace controller changed
    the namespace in between (409 Conflict), as a person would (solutions and common mistakes)."""
    t = target(env)
    for attempt in range(5):
        ns = json.loads(t.kubectl("get", "ns", namespace, "-o", "json"))
        ns["spec"]["finalizers"] = list(finalizers)
        try:
            t.kubectl("replace", "--raw", f"/api/v1/namespaces/{namespace}/finalize", "-f", "-", input=json.dumps(ns))
            return
        except LabkitError as exc:
            if "(Conflict)" not in str(exc) or attempt == 4:
                raise


def original_uid(env, namespace: str) -> str | None:
    """The UID the lab gave `namespace` when it built it."""
    try:
        return json.loads((Path(env.dir) / "namespaces.json").read_text()).get(namespace)
    except (FileNotFoundError, ValueError):
        return None


def built_resource_version(env, namespace: str) -> str | None:
    """The resourceVersion of `namespace` right after the lab built it."""
    try:
        return json.loads((Path(env.dir) / BUILT_FILE).read_text())["resourceVersions"].get(namespace)
    except (FileNotFoundError, ValueError, KeyError):
        return None
