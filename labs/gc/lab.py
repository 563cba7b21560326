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
Namespaces predict-a and predict-b stay empty (the check of (f) plays its experiment on a server
of its own, labkit.gc.reconstruct).

`labkit reset gc EXERCISE` (reset_exercise) builds one exercise's objects afresh and leaves the
others as they are; the lab's state directory records when (labkit.state ready.json), so the
checks read only the audit events of requests that came after, and what was built
(built.json: each part's Pods by UID, the objects the checks compare with). Before a reset,
`student_work` lists what the student did to the part (their requests in the audit log) that
the reset would undo; answer files are never touched.
"""

import json
from pathlib import Path

from labkit import predictions, servers
from labkit.apiserver.errors import ApiError
from labkit.apiserver.process import spawn
from labkit.crashpoints import crash_point
from labkit.errors import LabkitError
from labkit.exercises import wait_for
from labkit.apiserver.target import SERVER_TAG, Target, for_env
from labkit.state import write_json_atomic

OPTIONS = ("kubeconfig", "context")
NAMESPACE = "shop"
PREDICT_NAMESPACES = ("predict-a", "predict-b")
KEEP_FINALIZER = "example.com/keep"
UPLOAD_FINALIZER = "example.com/upload"
GRACE = 2                       # terminationGracePeriodSeconds of the lab's Pods
SETTLE_TIMEOUT = 120            # seconds the lab's Pods may take to be Running


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


# -- each exercise's part of the starting state ----------------------------------------------------
# (objects: their app label, or (resource, name) pairs; build: creates them; settled: when done)

def _build_workload(kind: str, app: str, replicas: int):
    def build(env, target, client):
        if kind == "deployment":
            client.create("apps/v1", "deployments", deployment(app, replicas), NAMESPACE)
        else:
            client.create("apps/v1", "replicasets", replicaset(app, replicas), NAMESPACE)
    return build


def _build_archive(env, target, client):
    archive = client.create("v1", "configmaps", {"metadata": {"name": "archive"}, "data": {"kept": "yes"}}, NAMESPACE)
    target.record(env, "v1", "secrets", "archive-key", NAMESPACE, [KEEP_FINALIZER])
    client.create("v1", "secrets", {"metadata": {
        "name": "archive-key", "finalizers": [KEEP_FINALIZER],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "archive",
                             "uid": archive["metadata"]["uid"], "blockOwnerDeletion": True}]},
        "stringData": {"key": "s3cr3t"}}, NAMESPACE)


def _stick_reports(env, target, client):
    """(g): a Pod of reports gets a finalizer of its own, then reports is deleted in the foreground."""
    stuck = sorted(p["metadata"]["name"] for p in pods_of(client, "reports"))[0]
    target.record(env, "v1", "pods", stuck, NAMESPACE, [UPLOAD_FINALIZER])
    client.patch("v1", "pods", stuck, {"metadata": {"finalizers": [UPLOAD_FINALIZER]}}, "strategic", NAMESPACE)
    client.delete("apps/v1", "replicasets", "reports", NAMESPACE, options={"propagationPolicy": "Foreground"})

    def stuck_in_foreground():
        # the other Pod is on its way out (its grace period); the stuck one is being deleted too
        rs = client.get_or_none("apps/v1", "replicasets", "reports", NAMESPACE) or {}
        pods = pods_of(client, "reports")
        return "foregroundDeletion" in rs.get("metadata", {}).get("finalizers", []) and \
            stuck in [p["metadata"]["name"] for p in pods] and all(p["metadata"].get("deletionTimestamp") for p in pods)
    if not wait_for(stuck_in_foreground, timeout=60, interval=0.1):
        raise LabkitError("the ReplicaSet reports did not settle into its stuck foreground deletion within 60 s")


PARTS = {
    "owner-chain": {"apps": {"web": 3}, "build": [_build_workload("deployment", "web", 3)]},
    "background-delete": {"apps": {"cart": 2}, "build": [_build_workload("deployment", "cart", 2)]},
    "foreground-delete": {"apps": {"api": 2}, "build": [_build_workload("deployment", "api", 2)]},
    "orphan-adopt": {"apps": {"worker": 2}, "build": [_build_workload("replicaset", "worker", 2)],
                     "extra": [("apps/v1", "replicasets", "worker-v2")]},
    "unblocking-dependent": {"apps": {}, "build": [_build_archive],
                             "extra": [("v1", "secrets", "archive-key"), ("v1", "configmaps", "archive")]},
    "predict-dangling": {"apps": {}, "build": []},
    "stuck-finalizer": {"apps": {"reports": 2}, "build": [_build_workload("replicaset", "reports", 2)],
                        "after": _stick_reports},
}


BUILT = "built.json"


def built(env) -> dict:
    """What each exercise's part was built as: {exercise: {"pods": {app: [uid, ...]}, ...}}."""
    try:
        return json.loads((Path(env.dir) / BUILT).read_text())
    except (OSError, ValueError):
        return {}


def _record_built(env, client, parts) -> None:
    data = built(env)
    for part in parts:
        live = {app: [p for p in pods_of(client, app) if not p["metadata"].get("deletionTimestamp")]
                for app in PARTS[part]["apps"]}
        entry = {"pods": {app: sorted(p["metadata"]["uid"] for p in pods) for app, pods in live.items()},
                 "pod_names": {app: sorted(p["metadata"]["name"] for p in pods) for app, pods in live.items()}}
        if part == "unblocking-dependent":
            cm = client.get("v1", "configmaps", "archive", NAMESPACE)
            secret = client.get("v1", "secrets", "archive-key", NAMESPACE)
            entry["archive"] = cm["metadata"]["uid"]
            entry["secret"] = {"finalizers": secret["metadata"].get("finalizers") or [],
                               "ownerReferences": secret["metadata"].get("ownerReferences") or [],
                               "data": secret.get("data") or {}}
        if part == "predict-dangling":      # the experiment as the lab was built: what the check plays
            entry["experiment"] = (Path(__file__).resolve().parent / "scenarios" / "predict.yaml").read_text()
        if part == "stuck-finalizer":
            held = [p for p in pods_of(client, "reports") if UPLOAD_FINALIZER in (p["metadata"].get("finalizers") or [])]
            entry["held"] = {p["metadata"]["name"]: [UPLOAD_FINALIZER] for p in held}
        data[part] = entry
    write_json_atomic(Path(env.dir) / BUILT, data)


def _settle(client, parts) -> None:
    counts = {app: n for part in parts for app, n in PARTS[part]["apps"].items()}
    if not wait_for(lambda: all(_running(client, app, n) for app, n in counts.items()), timeout=SETTLE_TIMEOUT,
                    interval=0.2):
        raise LabkitError(f"the lab's Pods did not all become Running within {SETTLE_TIMEOUT} s")


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
        target.record(env, "v1", "namespaces", ns)
        client.create("v1", "namespaces", {"metadata": {"name": ns}})
    for part in PARTS.values():
        for build in part["build"]:
            build(env, target, client)
    client.create("v1", "configmaps", {"metadata": {"name": "settings"}, "data": {"color": "blue"}}, NAMESPACE)
    client.create("v1", "services", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}, NAMESPACE)
    crash_point("gc:objects")
    _settle(client, PARTS)
    for part in PARTS.values():
        if part.get("after"):
            part["after"](env, target, client)
    _record_built(env, client, PARTS)
    env.log(f"starting state loaded on {target.description}")


def reset_exercise(env, exercise_id: str) -> None:
    """Remove what is left of one exercise's objects (releasing every finalizer on them, Pods
    without grace) and build them afresh; the other exercises' objects are not touched."""
    part = PARTS[exercise_id]
    target = for_env(env)
    client = target.client()
    extra = [("v1", "configmaps", cm["metadata"]["name"], ns) for ns in PREDICT_NAMESPACES
             for cm in client.list("v1", "configmaps", ns)[0] if cm["metadata"]["name"] != "kube-root-ca.crt"] \
        if exercise_id == "predict-dangling" else []
    extra += [(v, r, n, NAMESPACE) for v, r, n in part.get("extra", [])]
    for app in part["apps"]:
        extra += [(api_version, resource, app, NAMESPACE) for api_version, resource in
                  (("apps/v1", "deployments"), ("apps/v1", "replicasets"))]

    def present():
        # listed afresh each time: a ReplicaSet may still create a Pod between one listing and its
        # own deletion, and that Pod would otherwise outlive the reset (and be copied by a student)
        found = list(extra)
        for app in part["apps"]:
            for api_version, resource in (("apps/v1", "deployments"), ("apps/v1", "replicasets"), ("v1", "pods")):
                found += [(api_version, resource, o["metadata"]["name"], NAMESPACE)
                          for o in client.list(api_version, resource, NAMESPACE, label_selector=f"app={app}")[0]]
            # a Pod of the part whose app label a student took off: its ReplicaSet released it and
            # made another, and it would outlive the reset (named after its ReplicaSet all the same)
            found += [("v1", "pods", o["metadata"]["name"], NAMESPACE) for o in client.list("v1", "pods", NAMESPACE)[0]
                      if o["metadata"]["name"].startswith(f"{app}-")]
        return [d for d in dict.fromkeys(found) if client.get_or_none(d[0], d[1], d[2], d[3]) is not None]

    def delete_present() -> bool:
        left = present()
        for api_version, resource, name, ns in left:
            try:
                client.patch(api_version, resource, name, {"metadata": {"finalizers": None}}, "merge", ns)
                client.delete(api_version, resource, name, ns, options={"propagationPolicy": "Background",
                                                                        "gracePeriodSeconds": 0})
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return not left
    if not wait_for(delete_present, timeout=60, interval=0.1):
        raise LabkitError(f"{', '.join(f'{r} {n}' for _, r, n, _ in present())} did not go away within 60 s")
    for build in part["build"]:
        build(env, target, client)
    _settle(client, [exercise_id])
    if part.get("after"):
        part["after"](env, target, client)
    _record_built(env, client, [exercise_id])
    env.log(f"exercise {exercise_id}: its objects were built afresh")


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
- `labkit gc graph -n {NAMESPACE}` — the owner-reference graph with each object's state (`-o svg --output-file g.svg`)
{follow}"""


# -- predict-dangling tried by hand in the lab's cluster --------------------------------------------

def first_try(env, since: float) -> dict | None:
    """The first sign, since `since` (the part's last build), that the student tried the experiment
    of predict-dangling, from the logs: {at, time, what, how[, server]}; None if none.
      create  a create of theirs in the experiment's namespaces (the lab leaves them empty), audit log;
      gc      anywhere in the cluster, the lab's garbage collector doing what the experiment asks
              about (decision log): dropping an owner that was never observed and does not exist
              (garbagecollector.go attemptToDeleteItem, a virtual node's 404; the decision says
              whether the GC's monitors ever saw that UID as that kind), or reporting an
              owner in another namespace (graph_builder.go reportInvalidNamespaceOwnerRef). Nothing
              the lab builds does either: only objects made with such owner references.
      elsewhere  the same, by the garbage collector of another labkit API server on this machine
              (another lab's, `labkit apiserver`'s: labkit.servers), since the exercise's last
              `--forget-prediction`: `server` is its state directory.
    On a real cluster only `elsewhere` can be found (labkit has no logs of the cluster)."""
    from labkit.apiserver import audit as audit_log
    target = for_env(env)
    tries = []
    for e in target.audit(since=since) or []:
        ref = e.get("objectRef") or {}
        if (e.get("user") or {}).get("username", "").startswith("system:"):
            continue
        if e.get("verb") == "create" and ref.get("namespace") in PREDICT_NAMESPACES and not ref.get("subresource"):
            tries.append({"at": audit_log.received_at(e), "time": e.get("requestReceivedTimestamp", "")[11:19],
                          "what": f"{ref.get('resource')} {ref.get('name') or ''} in {ref['namespace']}".strip(),
                          "how": "create"})
            break
    found = _gc_try(target.decisions(since=since) or [])
    if found is not None:
        tries.append({**found, "how": "gc"})
    # any other labkit API server on this machine (another lab's, `labkit apiserver`'s) answers the
    # same: a try there shows the outcome too (labkit.servers); tries before a forgotten one do not count
    forgotten = [e["at"] for e in predictions.forgotten(env.lab.id, "predict-dangling")]
    for other in servers.others(Path(env.dir) / SERVER_TAG):       # the lab's own, running or not: read above
        since = max(forgotten, default=0.0)
        found = _gc_try([d for d in servers.lines_with(other.state_dir, "decisions.log",
                                                         ("invalid-owner-reference", "virtual-delete"))
                         if d.get("ts", 0) >= since])
        if found is not None:
            tries.append({**found, "how": "elsewhere", "server": str(other.state_dir)})
    return min(tries, key=lambda t: t["at"]) if tries else None


def _gc_try(decisions) -> dict | None:
    """The first decision of a garbage collector's log that shows what predict-dangling asks about:
    dropping an owner that was never observed and does not exist, or reporting an owner in another
    namespace. {at, time, what}, or None."""
    import time

    from labkit.controllers.decisions import describe
    for d in decisions:
        if d.get("controller") != "garbagecollector":
            continue
        item = d.get("item") or {}
        # never_observed: no monitor of the GC ever saw that UID as that kind; an owner deleted
        # before its dependent's event reached the graph (another exercise's reset) was observed
        if d.get("action") == "virtual-delete" and d.get("never_observed"):
            what = f"{describe(item)}, an owner that never existed"
        elif d.get("action") == "invalid-owner-reference":
            what = f"{describe(item)}, whose owner lives in another namespace"
        else:
            continue
        return {"at": d["ts"], "time": time.strftime("%H:%M:%S", time.gmtime(d["ts"])), "what": what}
    return None


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before `labkit reset gc [EXERCISE]`: a try of predict-dangling's experiment in the lab's
    cluster is kept (labkit.predictions.keep_trial). A reset of the exercise builds its part afresh
    and its check reads the logs from then on; a reset of the whole lab starts a new API server
    with empty logs: neither may turn a prediction written after the try into one written before."""
    if exercise_id not in (None, "predict-dangling"):
        return []
    from labkit import predictions
    found = first_try(env, env.state.ready_time("predict-dangling"))
    if found is None:
        return []
    kept = predictions.keep_trial(env.lab.id, "predict-dangling", found)
    where = f"on the labkit API server of {kept['server']}" if kept.get("server") else "in the lab's cluster"
    return [predictions.trial_note("predict-dangling", f"labkit keeps that you tried the experiment of predict-dangling "
                                   f"{where} ({kept['what']}, at {kept['time']}): a prediction written or changed "
                                   "after that earns no points, after this reset too (unless --forget-prediction "
                                   "forgets it)")]


# -- what a reset would undo -----------------------------------------------------------------------

KIND_NAMES = {"deployments": "Deployment", "replicasets": "ReplicaSet", "pods": "Pod", "configmaps": "ConfigMap",
              "secrets": "Secret", "services": "Service", "events": "Event"}


def part_of(namespace: str | None, resource: str | None, name: str | None) -> str | None:
    """The exercise whose part of the lab an object belongs to (None: no exercise's)."""
    if namespace in PREDICT_NAMESPACES:
        return "predict-dangling"
    if namespace != NAMESPACE or not name:
        return None
    for exercise_id, part in PARTS.items():
        if resource in ("deployments", "replicasets", "pods") and any(
                name == app or name.startswith(app + "-") for app in part["apps"]):
            return exercise_id
        if any(r == resource and n == name for _v, r, n in part.get("extra", [])):
            return exercise_id
    return None


def student_work(env, exercise_id: str | None) -> list[str]:
    """What `labkit reset gc [EXERCISE]` would undo of what the student did: each successful
    request of theirs (kubectl, clients: not the cluster's own components) on the exercise's
    objects since its part was built, from the audit log. Answer files are never touched."""
    parts = [exercise_id] if exercise_id else list(PARTS)
    target = for_env(env)
    if not target.embedded:
        return [f"whatever you changed in namespaces {', '.join((NAMESPACE, *PREDICT_NAMESPACES))} on "
                f"{target.description} (labkit has no audit log of a real cluster to tell what)"]
    since = {part: env.state.ready_time(part) for part in parts}
    from labkit.apiserver.audit import received_at
    found = []
    for e in target.audit(since=min(since.values())) or []:
        user = (e.get("user") or {}).get("username", "")
        verb = e.get("verb")
        if user.startswith("system:") or verb not in ("create", "update", "patch", "delete", "deletecollection") \
                or (e.get("responseStatus") or {}).get("code", 500) >= 300:
            continue
        ref = e.get("objectRef") or {}
        part = part_of(ref.get("namespace"), ref.get("resource"), ref.get("name"))
        if part not in since or received_at(e) < since[part]:
            continue
        kind = KIND_NAMES.get(ref.get("resource"), ref.get("resource"))
        what = f"{kind} {ref.get('namespace')}/{ref.get('name')}" if ref.get("name") else \
            f"the {ref.get('resource')} of namespace {ref.get('namespace')}"
        phrase = {"create": f"the {what} you created", "delete": f"your deletion of {what}",
                  "deletecollection": f"your deletion of {what}"}.get(verb, f"your changes to {what}")
        if ref.get("subresource"):
            phrase = f"your changes to {what} ({ref['subresource']})"
        if phrase not in found:
            found.append(phrase)
    return found
