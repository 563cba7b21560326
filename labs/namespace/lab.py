"""The namespace lab's environment: the embedded API server with the garbage collector, the
workload controllers, the node stand-in and the namespace controller, and a few namespaces with
content. Three of them are deleted at once and stay Terminating, each for its own reason.

  billing     Deployment, ConfigMap, a Secret with finalizer billing.example.com/audit   (a)
  attic       Terminating: a ConfigMap held by attic.example.com/keep                     (b)
  reports     Terminating: a Backup (custom resource) held by backup.example.com/upload   (c)
  monitoring  a ConfigMap; APIService v1beta1.metrics.k8s.io served by kube-system/metrics-server (d)
  legacy      Terminating: a ConfigMap and a Backup, both held by finalizers              (e)
  sandbox     empty                                                                       (f)

Nothing runs that would ever remove the example finalizers: like an operator that was
uninstalled before its objects were deleted.
"""

import json
import os
from pathlib import Path

from labkit.apiserver.server import read_server_info, spawn

CRD_NAME = "backups.example.com"
APISERVICE = "v1beta1.metrics.k8s.io"
METRICS_SERVICE = ("kube-system", "metrics-server")
DELETED_AT_SETUP = ("attic", "reports", "legacy")

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
}


def server_dir(env) -> Path:
    return Path(env.dir) / "apiserver"


def client(env):
    info = read_server_info(server_dir(env))
    if info is None:
        from labkit.errors import LabkitError
        raise LabkitError("the namespace lab's API server is not running: `labkit run namespace`")
    return info.client()


def up(env):
    info = spawn(env)
    c = info.client()
    c.create("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
    _wait(lambda: c.request("GET", "/apis/example.com/v1")[0] == 200, "the Backup CRD to be served")
    c.create("v1", "services", {"apiVersion": "v1", "kind": "Service",
                                "metadata": {"name": METRICS_SERVICE[1], "labels": {"k8s-app": "metrics-server"}},
                                "spec": {"selector": {"k8s-app": "metrics-server"},
                                         "ports": [{"name": "https", "port": 443, "targetPort": 10250}]}},
             METRICS_SERVICE[0])
    c.create("apiregistration.k8s.io/v1", "apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                 "insecureSkipTLSVerify": True,
                 "service": {"namespace": METRICS_SERVICE[0], "name": METRICS_SERVICE[1], "port": 443}}})
    uids = {}
    for ns, objects in CONTENT.items():
        created = c.create("v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        uids[ns] = created["metadata"]["uid"]
        for api_version, resource, obj in objects:
            c.create(api_version, resource, obj, ns)
    for ns in DELETED_AT_SETUP:
        c.delete("v1", "namespaces", ns, options={"propagationPolicy": "Background"})
    (Path(env.dir) / "namespaces.json").write_text(json.dumps(uids, indent=2) + "\n")
    env.log("namespaces " + ", ".join(CONTENT) + f" created; {', '.join(DELETED_AT_SETUP)} deleted")


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    import time
    from labkit.errors import LabkitError
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise LabkitError(f"timed out waiting for {what}")


def is_up(env):
    info = read_server_info(server_dir(env))
    if info is None:
        return False
    try:
        os.kill(info.pid, 0)
    except OSError:
        return False
    return (Path(env.dir) / "namespaces.json").exists()


def access(env):
    info = read_server_info(server_dir(env))
    kubeconfig = info.kubeconfig if info else server_dir(env) / "kubeconfig"
    return f"""## Your cluster

```sh
export KUBECONFIG={kubeconfig}
kubectl get namespaces
labkit ns explain attic          # why a namespace is still Terminating
labkit ns log -f                 # the namespace controller's decisions, with reasons
```
"""


def original_uid(env, namespace: str) -> str | None:
    """The UID the lab gave `namespace` when it built it."""
    try:
        return json.loads((Path(env.dir) / "namespaces.json").read_text()).get(namespace)
    except (FileNotFoundError, ValueError):
        return None
