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

With `labkit run namespace --kubeconfig FILE [--context C]` the same objects are built on a real
cluster instead, whose own namespace controller and kube-aggregator do the work. The APIService
points at a Service without Pods there too; a real aggregator checks endpoints as well as the
Service (remote_available_controller.go: EndpointsNotFound / MissingEndpoints), so there it is
Available=False from the start, and every namespace deletion on that cluster waits on the failing
discovery until (d) is fixed: `access()` tells the student to do (d) first. labkit has no audit
log or decision log of a cluster: checks that need them say so and judge the live state only.
Everything is created through the ledger (labkit.apiserver.target), and `labkit cleanup
namespace` deletes it again, releasing the lab's own example finalizers.
"""

import json
import os
from pathlib import Path

from labkit.apiserver.errors import ApiError
from labkit.apiserver.server import read_server_info, spawn
from labkit.apiserver.target import SERVER_TAG, Target, for_env
from labkit.errors import LabkitError

OPTIONS = ("kubeconfig", "context")

CRD_NAME = "backups.example.com"
APISERVICE = "v1beta1.metrics.k8s.io"
METRICS_SERVICE = ("kube-system", "metrics-server")
DELETED_AT_SETUP = ("attic", "reports", "legacy")
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
}


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
        spawn(env, SERVER_TAG)
        t = target(env)
    c = t.client()
    t.create(env, "apiextensions.k8s.io/v1", "customresourcedefinitions", CRD)
    _wait(lambda: c.request("GET", "/apis/example.com/v1")[0] == 200, "the Backup CRD to be served")
    _metrics_apiservice(env, t)
    uids, versions = {}, {}
    for ns in CONTENT:
        uids[ns], versions[ns] = _build_namespace(env, t, ns)
    (Path(env.dir) / BUILT_FILE).write_text(json.dumps({"resourceVersions": versions}, indent=2) + "\n")
    (Path(env.dir) / "namespaces.json").write_text(json.dumps(uids, indent=2) + "\n")
    env.log("namespaces " + ", ".join(CONTENT) + f" created on {t.description}; {', '.join(DELETED_AT_SETUP)} deleted")


def _build_namespace(env, t: Target, ns: str) -> tuple[str, str]:
    """Create namespace `ns` with its content (and delete it, if it starts Terminating); its
    UID and resourceVersion right after it was made."""
    created = t.create(env, "v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for api_version, resource, obj in CONTENT[ns]:
        t.create(env, api_version, resource, obj, ns)
    if ns in DELETED_AT_SETUP:
        t.client().delete("v1", "namespaces", ns, options={"propagationPolicy": "Background"})
    return created["metadata"]["uid"], created["metadata"]["resourceVersion"]


def _metrics_apiservice(env, t: Target) -> None:
    """The Service kube-system/metrics-server and the APIService it serves (d)."""
    t.create(env, "v1", "services", {"apiVersion": "v1", "kind": "Service",
                                     "metadata": {"name": METRICS_SERVICE[1], "labels": {"k8s-app": "metrics-server"}},
                                     "spec": {"selector": {"k8s-app": "metrics-server"},
                                              "ports": [{"name": "https", "port": 443, "targetPort": 10250}]}},
             METRICS_SERVICE[0])
    t.create(env, "apiregistration.k8s.io/v1", "apiservices", {
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                 "insecureSkipTLSVerify": True,
                 "service": {"namespace": METRICS_SERVICE[0], "name": METRICS_SERVICE[1], "port": 443}}})


# which namespace each exercise works on
EXERCISE_NAMESPACES = {"conditions": "billing", "terminating-create": "attic", "release-finalizer": "reports",
                       "broken-apiservice": "monitoring", "force-finalize": "legacy", "own-finalizer": "sandbox"}


def reset_exercise(env, exercise_id: str) -> None:
    """Build one exercise's namespace afresh: everything stored under its name goes (finalizers
    released, the namespace finalized once it is empty), then it is made again as `labkit run`
    makes it. For broken-apiservice, the Service and the APIService come back too."""
    ns = EXERCISE_NAMESPACES[exercise_id]
    t = target(env)
    c = t.client()
    if exercise_id == "broken-apiservice":
        for api_version, resource, name, namespace in (
                ("apiregistration.k8s.io/v1", "apiservices", APISERVICE, None),
                ("v1", "services", METRICS_SERVICE[1], METRICS_SERVICE[0])):
            try:
                c.delete(api_version, resource, name, namespace)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        _wait(lambda: c.get_or_none("apiregistration.k8s.io/v1", "apiservices", APISERVICE) is None,
              "the APIService to go")
        _metrics_apiservice(env, t)
        if t.embedded:      # (on a real cluster it has no endpoints: Available=False, see access())
            _wait(lambda: _available(c), f"APIService {APISERVICE} to be Available")
    _empty(c, ns)
    uid, version = _build_namespace(env, t, ns)
    for name, value in ((BUILT_FILE, version), ("namespaces.json", uid)):
        path = Path(env.dir) / name
        data = json.loads(path.read_text())
        (data["resourceVersions"] if name == BUILT_FILE else data)[ns] = value
        path.write_text(json.dumps(data, indent=2) + "\n")
    env.log(f"exercise {exercise_id}: namespace {ns} built afresh")


def _available(c) -> bool:
    svc = c.get_or_none("apiregistration.k8s.io/v1", "apiservices", APISERVICE) or {}
    return any(x.get("type") == "Available" and x.get("status") == "True"
               for x in (svc.get("status") or {}).get("conditions") or [])


def _empty(c, ns: str) -> None:
    """Remove namespace `ns` and everything stored under its name, now."""
    def stored():
        found = c.discover()
        return [(r.api_version, r.resource, item["metadata"]["name"]) for r in found.resources
                if r.namespaced and "list" in r.verbs and "delete" in r.verbs and found.preferred.get(r.group) == r.version
                for item in c.list(r.api_version, r.resource, ns)[0]]
    def delete_stored():
        left = stored()
        for api_version, resource, name in left:   # (a workload controller may make more meanwhile)
            try:
                c.patch(api_version, resource, name, {"metadata": {"finalizers": None}}, "merge", ns)
                c.delete(api_version, resource, name, ns, options={"gracePeriodSeconds": 0,
                                                                    "propagationPolicy": "Background"})
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return not left
    _wait(delete_stored, f"the objects stored under {ns} to go")
    current = c.get_or_none("v1", "namespaces", ns)
    if current is not None:
        if not current["metadata"].get("deletionTimestamp"):
            c.delete("v1", "namespaces", ns)
            current = c.get_or_none("v1", "namespaces", ns)
        if current is not None:
            current.setdefault("spec", {})["finalizers"] = []
            try:
                c.update("v1", "namespaces", current, subresource="finalize")
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
    _wait(lambda: c.get_or_none("v1", "namespaces", ns) is None, f"namespace {ns} to go")


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    import time
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
    info = read_server_info(server_dir(env))
    if info is None:
        return False
    try:
        os.kill(info.pid, 0)
    except OSError:
        return False
    return True


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
