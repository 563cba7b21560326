"""The gc lab: owner references and cascading deletion, with real kubectl.

By default the lab starts labkit's embedded API server with its controllers (garbage collector,
Deployment, ReplicaSet, node stand-in) and writes a kubeconfig for it. With
`labkit run gc --kubeconfig FILE` it loads the same starting state into a real cluster instead
(its own controllers do the work there; labkit has no audit log or GC decision log to read, so
the checks that need them say so and judge the final state only).

Starting state, namespace `shop` (each exercise has its own objects, so they do not interfere):

  Deployment web (3 Pods)        (a) read the owner chain of a Pod
  Deployment cart (2 Pods)       (b) background deletion
  Deployment api (2 Pods)        (c) foreground deletion
  ReplicaSet worker (2 Pods)     (d) orphan its Pods, adopt them with a new ReplicaSet
  ConfigMap archive, Secret archive-key (owned by archive, blockOwnerDeletion, finalizer
                                 example.com/keep)                         (e)
  ReplicaSet reports, deleted with Foreground; one of its Pods holds the finalizer
                                 example.com/upload                        (g)
  ConfigMap settings, Service web: loose objects without owners
Namespaces predict-a and predict-b stay empty: the check of (f) plays its experiment there.
"""

import json
import time
from pathlib import Path

from labkit.apiserver.errors import ApiError
from labkit.apiserver.server import spawn
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError
from labkit.exercises import wait_for
from labkit.apiserver.target import SERVER_TAG, Target, for_env

OPTIONS = ("kubeconfig", "context")
NAMESPACE = "shop"
PREDICT_NAMESPACES = ("predict-a", "predict-b")
KEEP_FINALIZER = "example.com/keep"
UPLOAD_FINALIZER = "example.com/upload"
READY_FILE = "gc-ready.json"    # when the starting state was complete: requests after it are the student's
GRACE = 2                       # terminationGracePeriodSeconds of the lab's Pods


def _template(app: str) -> dict:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": GRACE,
                     # sleep as PID 1 ignores SIGTERM: the kubelet kills it when the grace period is over
                     "containers": [{"name": app, "image": "busybox:1.36", "command": ["sleep", "infinity"]}]}}


def deployment(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": _template(name)}}


def replicaset(name: str, replicas: int, app: str | None = None) -> dict:
    app = app or name
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}}, "template": _template(app)}}


def pods_of(client, app: str) -> list[dict]:
    return client.list("v1", "pods", NAMESPACE, label_selector=f"app={app}")[0]


def _running(client, app: str, count: int) -> bool:
    pods = [p for p in pods_of(client, app) if not p["metadata"].get("deletionTimestamp")]
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _record(env, target: Target, api_version: str, resource: str, name: str, namespace: str | None = None,
            finalizers: list[str] | None = None) -> None:
    """On a real cluster, everything the lab creates goes through the ledger first, with the
    finalizers it puts on objects (nothing on the cluster removes them: cleanup releases them, or
    the namespace could never finish)."""
    target.record(env, api_version, resource, name, namespace, finalizers)


def up(env):
    if env.options.get("kubeconfig"):
        target = Target(Path(env.options["kubeconfig"]), env.options.get("context"))
        env.log(f"using the cluster of {target.kubeconfig}")
    else:
        spawn(env, SERVER_TAG)      # the server's state directory is in the ledger: a rebuild starts empty
        crash_point("gc:server")
        target = for_env(env)
    client = target.client()
    for ns in (NAMESPACE, *PREDICT_NAMESPACES):
        # on a real cluster, never take over (and later delete) a namespace that was there before
        if not target.embedded and client.get_or_none("v1", "namespaces", ns) is not None:
            raise LabkitError(f"namespace {ns} already exists on {target.description}: the lab needs it "
                              "for itself (delete it, or use another cluster)")
        _record(env, target, "v1", "namespaces", ns)
        client.create("v1", "namespaces", {"metadata": {"name": ns}})
    for name, replicas in (("web", 3), ("cart", 2), ("api", 2)):
        client.create("apps/v1", "deployments", deployment(name, replicas), NAMESPACE)
    for name in ("worker", "reports"):
        client.create("apps/v1", "replicasets", replicaset(name, 2), NAMESPACE)
    client.create("v1", "configmaps", {"metadata": {"name": "settings"}, "data": {"color": "blue"}}, NAMESPACE)
    client.create("v1", "services", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}, NAMESPACE)
    archive = client.create("v1", "configmaps", {"metadata": {"name": "archive"}, "data": {"kept": "yes"}}, NAMESPACE)
    _record(env, target, "v1", "secrets", "archive-key", NAMESPACE, [KEEP_FINALIZER])
    client.create("v1", "secrets", {"metadata": {
        "name": "archive-key", "finalizers": [KEEP_FINALIZER],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "archive",
                             "uid": archive["metadata"]["uid"], "blockOwnerDeletion": True}]},
        "stringData": {"key": "s3cr3t"}}, NAMESPACE)
    crash_point("gc:objects")
    expected = {"web": 3, "cart": 2, "api": 2, "worker": 2, "reports": 2}
    if not wait_for(lambda: all(_running(client, app, n) for app, n in expected.items()), timeout=120, interval=0.2):
        raise LabkitError("the lab's Pods did not all become Running within 120 s")
    # (g): a Pod with a finalizer of its own, then the ReplicaSet deleted in the foreground
    stuck = sorted(p["metadata"]["name"] for p in pods_of(client, "reports"))[0]
    _record(env, target, "v1", "pods", stuck, NAMESPACE, [UPLOAD_FINALIZER])
    client.patch("v1", "pods", stuck, {"metadata": {"finalizers": [UPLOAD_FINALIZER]}}, "strategic", NAMESPACE)
    client.delete("apps/v1", "replicasets", "reports", NAMESPACE, options={"propagationPolicy": "Foreground"})
    if not wait_for(lambda: [p["metadata"]["name"] for p in pods_of(client, "reports")] == [stuck]
                    and "foregroundDeletion" in (client.get_or_none("apps/v1", "replicasets", "reports", NAMESPACE) or {})
                    .get("metadata", {}).get("finalizers", []), timeout=60, interval=0.2):
        raise LabkitError("the ReplicaSet reports did not settle into its stuck foreground deletion within 60 s")
    (Path(env.dir) / READY_FILE).write_text(json.dumps({"ready": time.time()}) + "\n")
    env.log(f"starting state loaded on {target.description}")


def ready_time(env) -> float:
    try:
        return json.loads((Path(env.dir) / READY_FILE).read_text())["ready"]
    except (OSError, ValueError, KeyError):
        return 0.0


def is_up(env):
    try:
        target = for_env(env)
        target.client().get("v1", "namespaces", NAMESPACE)
        return True
    except (LabkitError, ApiError, OSError):
        return False


def access(env):
    target = for_env(env)
    where = ("labkit's embedded API server, with labkit's garbage collector, Deployment and ReplicaSet "
             "controllers" if target.embedded else f"your cluster ({target.kubeconfig}) and its own controllers")
    follow = ("- `labkit gc log -f` — the garbage collector's decisions, each with its reason\n"
              f"- audit log (every request, with its DeleteOptions): `{target.state_dir}/audit.log`\n"
              if target.embedded else
              "- (on a real cluster there is no labkit GC log or audit log: checks that need them say so)\n")
    return f"""## Your cluster

The objects live on {where}.

    export KUBECONFIG={target.kubeconfig}
    kubectl get deploy,rs,pods,cm,secrets -n {NAMESPACE}

- the experiment of predict-dangling: `{Path(__file__).resolve().parent}/scenarios/predict.yaml`
- `labkit gc graph -n {NAMESPACE}` — the owner-reference graph with each object's state (`--format svg -o g.svg`)
{follow}"""
