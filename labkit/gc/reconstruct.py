"""labkit's reconstruction of what the garbage collector does to a situation, on a fresh embedded
API server of its own (nothing of it shows in a running lab's logs): the truth the gc lab's
prediction checks compare answers with.

  cascade(...)   a Deployment built as a lab builds it, deleted with one propagationPolicy: the
                 order of the first DELETE request of each kind (kubectl's view of "what went
                 when"), the finalizers the owner carried while it waited, and the order in which
                 the objects were removed from the API (their DELETED watch events, in
                 resourceVersion order).
  predict(...)   a scenario file played to its end: what became of each object, and the reasons
                 of the Warning events recorded about each.

Upstream, the behaviour reconstructed is kube-controller-manager's garbage collector
(pkg/controller/garbagecollector/garbagecollector.go: attemptToDeleteItem, processDeletingDependentsItem,
orphanDependents) with the API server's deletion handling
(staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go: Delete, updateForGracefulDeletionAndFinalizers):
labkit's embedded server and controllers are that reconstruction."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

KIND_OF = {"deployments": "Deployment", "replicasets": "ReplicaSet", "pods": "Pod"}
# and the serviceaccount controller: the ServiceAccount admission plugin refuses the ReplicaSet's Pods
# in a namespace without its ServiceAccount `default`
CONTROLLERS = ("garbagecollector", "deployment", "replicaset", "node", "serviceaccount")


@dataclass
class Cascade:
    policy: str
    delete_order: list[str] = field(default_factory=list)     # kinds, by their first DELETE request
    waited_with: list[str] = field(default_factory=list)      # the owner's finalizers while it waited
    removed: list[str] = field(default_factory=list)          # kinds, in the order objects left the API
    left: list[str] = field(default_factory=list)             # kinds still there at the end

    @property
    def last_removed(self) -> str | None:
        return self.removed[-1] if self.removed else None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _running(client, namespace: str, app: str, replicas: int) -> bool:
    pods = client.list("v1", "pods", namespace, label_selector=f"app={app}")[0]
    pods = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return len(pods) == replicas and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def _wait(predicate, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def cascade(workload: dict, namespace: str, policy: str, timeout: float = 60.0) -> Cascade:
    """Create the Deployment `workload` in `namespace` of a fresh server with labkit's garbage
    collector, Deployment and ReplicaSet controllers and node stand-in, wait for its Pods, delete
    it with `policy` (Background or Foreground) and watch until all of it is gone (or `timeout`)."""
    from labkit.apiserver import audit
    from labkit.apiserver.server import EmbeddedServer

    name = workload["metadata"]["name"]
    app = workload["spec"]["selector"]["matchLabels"]["app"]
    replicas = workload["spec"].get("replicas", 1)
    out = Cascade(policy)
    with tempfile.TemporaryDirectory(prefix="labkit-gc-reconstruct-") as tmp:
        server = EmbeddedServer(tmp, controllers=CONTROLLERS).start()
        watches = []
        try:
            client = server.client()
            client.create("v1", "namespaces", {"metadata": {"name": namespace}})
            client.create("apps/v1", "deployments", workload, namespace)
            if not _wait(lambda: _running(client, namespace, app, replicas), timeout):
                raise RuntimeError(f"the reconstruction's Pods of {name} did not become Running in {timeout:g} s")
            _, rv = client.list("v1", "pods", namespace)
            for api_version, resource in (("apps/v1", "deployments"), ("apps/v1", "replicasets"), ("v1", "pods")):
                watches.append((resource, client.watch(api_version, resource, namespace, resource_version=rv,
                                                       bookmarks=False)))
            since = time.time()
            client.delete("apps/v1", "deployments", name, namespace, options={"propagationPolicy": policy})

            def chain():
                found = []
                dep = client.get_or_none("apps/v1", "deployments", name, namespace)
                if dep is not None:
                    found.append(dict(dep, kind="Deployment"))
                    for f in dep["metadata"].get("finalizers") or []:
                        if dep["metadata"].get("deletionTimestamp") and f not in out.waited_with:
                            out.waited_with.append(f)
                for api_version, resource in (("apps/v1", "replicasets"), ("v1", "pods")):
                    found += [dict(o, kind=KIND_OF[resource]) for o in
                              client.list(api_version, resource, namespace, label_selector=f"app={app}")[0]]
                return found

            _wait(lambda: not chain(), timeout)
            out.left = sorted({o["kind"] for o in chain()})
            deleted = []
            for resource, watch in watches:
                while True:
                    event = watch.next(0.2)
                    if event is None:
                        break
                    if event.get("type") == "DELETED":
                        deleted.append((int(event["object"]["metadata"]["resourceVersion"]), KIND_OF[resource]))
            out.removed = [kind for _, kind in sorted(deleted)]
            firsts: dict[str, float] = {}
            for e in audit.read(Path(tmp) / "audit.log"):
                if e.get("verb") != "delete" or (e.get("responseStatus") or {}).get("code", 500) >= 300:
                    continue
                kind = KIND_OF.get((e.get("objectRef") or {}).get("resource"))
                if kind and kind not in firsts and audit.received_at(e) >= since:
                    firsts[kind] = audit.received_at(e)
            out.delete_order = sorted(firsts, key=firsts.get)
        finally:
            for _, watch in watches:
                watch.stop()
            server.stop()
    return out


@dataclass
class Played:
    present: dict[str, dict | None]          # ref -> the object at the end (None: gone or being deleted)
    owners: dict[str, list[str]]             # ref -> the names of its owners at the end
    warnings: dict[str, list[str]]           # ref -> reasons of the Warning events about it


def predict(path: str | Path) -> Played:
    """Play the scenario at `path` on a fresh embedded server (its own, not the lab's) to its end."""
    from labkit.gc.runner import EmbeddedTarget, Runner
    from labkit.gc.scenario import load

    play = load(path)
    target = EmbeddedTarget(play.emulated_version)
    try:
        runner = Runner(play, target)
        runner.run()
        code, body = target.client.request("GET", "/api/v1/events")
        events = body.get("items", []) if code == 200 else []
        present, owners, warnings = {}, {}, {}
        for ref, info in runner.refs.items():
            obj = runner.fetch(ref)
            live = obj is not None and not obj["metadata"].get("deletionTimestamp")
            present[ref] = obj if live else None
            owners[ref] = sorted(r.get("name") for r in (obj or {}).get("metadata", {}).get("ownerReferences") or []) \
                if live else []
            warnings[ref] = sorted({e.get("reason") for e in events if e.get("type") == "Warning"
                                    and (e.get("involvedObject") or {}).get("uid") == info.uid})
        return Played(present, owners, warnings)
    finally:
        target.close()
