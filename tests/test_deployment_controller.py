"""The Deployment controller against the server's writes: ReplicaSets exist per pod template, and
no way of rewriting an unchanged Deployment (replace, every patch type, apply) makes a new one."""

from __future__ import annotations

import copy
import threading

import pytest

from labkit.apiserver.errors import ApiError
from labkit.apiserver.server import EmbeddedServer
from labkit.controllers import replicaset
from support import host_lock, wait_until

NS = "default"
MANIFEST = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": NS},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"terminationGracePeriodSeconds": 0,
                                   "containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
}
CONTAINERS = MANIFEST["spec"]["template"]["spec"]["containers"]


@pytest.fixture
def server(tmp_path):
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver",
                             controllers=["deployment", "replicaset", "node", "garbagecollector", "serviceaccount"]).start()
    yield srv
    with host_lock(False):
        srv.stop()


class ReplicaSetCreations:
    """Counts every ReplicaSet ever written as new (storage ADDED events)."""

    def __init__(self, server):
        self.names: list[str] = []
        server.registry.store.add_listener(self)

    def __call__(self, event):
        if event.key == "apps/replicasets" and event.type == "ADDED":
            self.names.append(event.name)


def settled(server, c, replicas: int) -> bool:
    if not server.controllers.wait_idle(10):
        return False
    pods, _ = c.list("v1", "pods", NS, "app=web")
    running = [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
    return len(running) == replicas and len(pods) == replicas


def pod_uids(c) -> set[str]:
    return {p["metadata"]["uid"] for p in c.list("v1", "pods", NS, "app=web")[0]}


def test_rewriting_an_unchanged_deployment_makes_no_replicaset_and_no_pod_churn(server):
    c = server.client()
    created = ReplicaSetCreations(server)
    c.create("apps/v1", "deployments", MANIFEST, NS)
    assert wait_until(lambda: settled(server, c, 2))
    uids = pod_uids(c)
    path = "/apis/apps/v1/namespaces/default/deployments/web"

    # kubectl replace -f of the manifest (no defaults, no resourceVersion)
    assert c.request("PUT", path, body=MANIFEST)[0] == 200
    # kubectl edit / replace of `kubectl get -o yaml` output as older servers wrote it
    # (a controller's status write between the get and the put is a 409, as kubectl edit would
    # get; it gets the object again and retries, as kubectl's user would)
    for _ in range(20):
        live = c.get("apps/v1", "deployments", "web", NS)
        live["spec"]["template"]["metadata"]["creationTimestamp"] = None
        live["spec"]["template"]["spec"]["containers"][0]["args"] = []
        status = c.request("PUT", path, body=live)[0]
        if status != 409:
            break
    assert status == 200
    # every patch type, each restating the containers as the manifest has them
    template_patch = {"spec": {"template": {"spec": {"containers": copy.deepcopy(CONTAINERS)}}}}
    c.patch("apps/v1", "deployments", "web", template_patch, "merge", NS)
    c.patch("apps/v1", "deployments", "web", template_patch, "strategic", NS)
    c.patch("apps/v1", "deployments", "web",
            [{"op": "replace", "path": "/spec/template/spec/containers", "value": CONTAINERS}], "json", NS)
    c.patch("apps/v1", "deployments", "web", MANIFEST, "apply", NS, query={"fieldManager": "student"})

    assert wait_until(lambda: settled(server, c, 2))
    assert created.names and len(created.names) == 1, created.names
    assert len(c.list("apps/v1", "replicasets", NS)[0]) == 1
    assert pod_uids(c) == uids, "pods were replaced although the template never changed"


def test_conflicting_writers_make_at_most_one_replicaset_per_template(server):
    """Two writers keep switching the image between two values, conflicting with each other and
    the controllers. Upstream keeps one ReplicaSet per distinct template (FindNewReplicaSet finds
    the existing one when a template comes back), so at most two are ever created."""
    c = server.client()
    created = ReplicaSetCreations(server)
    c.create("apps/v1", "deployments", MANIFEST, NS)
    assert wait_until(lambda: settled(server, c, 2))
    writes = {"ok": 0, "conflicts": 0}
    lock = threading.Lock()

    def writer(image: str, rounds: int):
        mine = server.client()
        done = 0
        while done < rounds:
            d = mine.get("apps/v1", "deployments", "web", NS)
            d["spec"]["template"]["spec"]["containers"][0]["image"] = image
            try:
                mine.update("apps/v1", "deployments", d, NS)
            except ApiError as exc:
                assert exc.code == 409, exc.message
                with lock:
                    writes["conflicts"] += 1
                continue
            with lock:
                writes["ok"] += 1
            done += 1

    threads = [threading.Thread(target=writer, args=(image, 25)) for image in ("nginx:1.27", "nginx:1.28")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert writes["ok"] == 50
    assert wait_until(lambda: settled(server, c, 2))
    assert 1 <= len(created.names) <= 2, created.names
    final = c.get("apps/v1", "deployments", "web", NS)["spec"]["template"]["spec"]["containers"][0]["image"]
    scaled = {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs["spec"]["replicas"]
              for rs in c.list("apps/v1", "replicasets", NS)[0]}
    assert scaled[final] == 2 and all(n == 0 for image, n in scaled.items() if image != final), scaled


# -- rollouts as upstream's controller does them -------------------------------------------------

def deployment(name: str, replicas: int = 4, image: str = "nginx:1.27", **spec) -> dict:
    body = copy.deepcopy(MANIFEST)
    body["metadata"]["name"] = name
    body["spec"].update(replicas=replicas, selector={"matchLabels": {"app": name}}, **spec)
    body["spec"]["template"]["metadata"]["labels"] = {"app": name}
    body["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return body


def replicasets(c, name: str) -> dict[str, dict]:
    """image -> ReplicaSet of the Deployment `name`."""
    return {rs["spec"]["template"]["spec"]["containers"][0]["image"]: rs
            for rs in c.list("apps/v1", "replicasets", NS, f"app={name}")[0]}


def set_image(c, name: str, image: str) -> None:
    c.patch("apps/v1", "deployments", name, {"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": image}]}}}}, "strategic", NS)


@pytest.fixture
def no_node(tmp_path):
    """A server whose pods never run (no scheduler/kubelet stand-in): rollouts wait on availability."""
    with host_lock(False):
        srv = EmbeddedServer(tmp_path / "apiserver", controllers=["deployment", "replicaset", "serviceaccount"]).start()
    yield srv
    with host_lock(False):
        srv.stop()


def test_a_rolling_update_stays_within_max_surge_and_max_unavailable(no_node):
    c = no_node.client()
    c.create("apps/v1", "deployments", deployment("roll", strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}), NS)
    assert wait_until(lambda: no_node.controllers.wait_idle(5) and len(replicasets(c, "roll")) == 1)
    set_image(c, "roll", "nginx:1.28")
    assert no_node.controllers.wait_idle(10)
    rss = replicasets(c, "roll")
    # no pod is available, so nothing old may go, and only maxSurge=1 new one may come
    assert (rss["nginx:1.27"]["spec"]["replicas"], rss["nginx:1.28"]["spec"]["replicas"]) == (4, 1)
    new = rss["nginx:1.28"]["metadata"]
    assert new["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert new["annotations"]["deployment.kubernetes.io/desired-replicas"] == "4"
    assert new["annotations"]["deployment.kubernetes.io/max-replicas"] == "5"
    d = c.get("apps/v1", "deployments", "roll", NS)
    progressing = next(x for x in d["status"]["conditions"] if x["type"] == "Progressing")
    assert (progressing["reason"], progressing["message"]) == ("ReplicaSetUpdated",
                                                               f'ReplicaSet "{new["name"]}" is progressing.')
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"


def test_recreate_scales_the_old_replicaset_down_before_creating_the_new(server):
    c = server.client()
    c.create("apps/v1", "deployments", deployment("rec", replicas=2, strategy={"type": "Recreate"}), NS)
    assert wait_until(lambda: settled_app(server, c, "rec", 2))
    seen: list[tuple[str, int]] = []
    server.registry.store.add_listener(lambda e: e.key == "apps/replicasets" and e.type in ("ADDED", "MODIFIED")
                                       and seen.append((e.obj["spec"]["template"]["spec"]["containers"][0]["image"],
                                                        e.obj["spec"]["replicas"])))
    set_image(c, "rec", "nginx:1.28")
    assert wait_until(lambda: settled_app(server, c, "rec", 2))
    old_down = seen.index(("nginx:1.27", 0))
    new_first = next(i for i, (image, _) in enumerate(seen) if image == "nginx:1.28")
    assert old_down < new_first, seen


def settled_app(server, c, app: str, replicas: int) -> bool:
    if not server.controllers.wait_idle(10):
        return False
    pods = c.list("v1", "pods", NS, f"app={app}")[0]
    return len(pods) == replicas and all(p["status"].get("phase") == "Running" for p in pods)


def test_pause_resume_rollback_history_and_foreign_conditions(server):
    c = server.client()
    c.create("apps/v1", "deployments", deployment("hist", replicas=1, revisionHistoryLimit=2), NS)
    assert wait_until(lambda: settled_app(server, c, "hist", 1))
    # someone else's condition on the Deployment stays
    d = c.get("apps/v1", "deployments", "hist", NS)
    d["status"]["conditions"].append({"type": "example.com/Audited", "status": "True", "reason": "Checked"})
    c.update("apps/v1", "deployments", d, NS, "status")
    # paused: a template change creates no ReplicaSet
    c.patch("apps/v1", "deployments", "hist", {"spec": {"paused": True}}, "merge", NS)
    set_image(c, "hist", "nginx:1.28")
    assert server.controllers.wait_idle(10)
    assert list(replicasets(c, "hist")) == ["nginx:1.27"]
    conditions = {x["type"]: x for x in c.get("apps/v1", "deployments", "hist", NS)["status"]["conditions"]}
    assert (conditions["Progressing"]["status"], conditions["Progressing"]["reason"]) == ("Unknown", "DeploymentPaused")
    c.patch("apps/v1", "deployments", "hist", {"spec": {"paused": None}}, "merge", NS)
    assert wait_until(lambda: settled_app(server, c, "hist", 1) and "nginx:1.28" in replicasets(c, "hist"))
    for image in ("nginx:1.29", "nginx:1.30"):
        set_image(c, "hist", image)
        assert wait_until(lambda: settled_app(server, c, "hist", 1) and
                          replicasets(c, "hist").get(image, {}).get("status", {}).get("readyReplicas") == 1)
    # revisionHistoryLimit 2: the oldest revision's ReplicaSet is gone
    assert wait_until(lambda: sorted(replicasets(c, "hist")) == ["nginx:1.28", "nginx:1.29", "nginx:1.30"])
    # kubectl rollout undo: the previous revision's template comes back and its ReplicaSet is reused
    previous = replicasets(c, "hist")["nginx:1.29"]
    template = copy.deepcopy(previous["spec"]["template"])
    del template["metadata"]["labels"]["pod-template-hash"]
    c.patch("apps/v1", "deployments", "hist", [{"op": "replace", "path": "/spec/template", "value": template}],
            "json", NS)
    assert wait_until(lambda: settled_app(server, c, "hist", 1) and
                      replicasets(c, "hist")["nginx:1.29"]["spec"]["replicas"] == 1)
    reused = replicasets(c, "hist")["nginx:1.29"]
    assert reused["metadata"]["uid"] == previous["metadata"]["uid"]
    assert reused["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "5"
    assert reused["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "3"
    conditions = {x["type"]: x for x in c.get("apps/v1", "deployments", "hist", NS)["status"]["conditions"]}
    assert conditions["example.com/Audited"]["reason"] == "Checked"
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_scaling_events_and_pod_events(server):
    c = server.client()
    c.create("apps/v1", "deployments", deployment("ev", replicas=1), NS)
    assert wait_until(lambda: settled_app(server, c, "ev", 1))
    c.patch("apps/v1", "deployments", "ev", {"spec": {"replicas": 3}}, "merge", NS, subresource="scale")
    assert wait_until(lambda: settled_app(server, c, "ev", 3))
    rs = next(iter(replicasets(c, "ev").values()))
    events = c.list("v1", "events", NS, field_selector="involvedObject.name=ev")[0]
    messages = [(e["reason"], e["message"], e["source"]["component"]) for e in events]
    rs_name = rs["metadata"]["name"]
    assert ("ScalingReplicaSet", f"Scaled up replica set {rs_name} from 0 to 1", "deployment-controller") in messages
    assert ("ScalingReplicaSet", f"Scaled up replica set {rs_name} from 1 to 3", "deployment-controller") in messages
    created = c.list("v1", "events", NS, field_selector=f"involvedObject.name={rs_name},reason=SuccessfulCreate")[0]
    pods = sorted(p["metadata"]["name"] for p in c.list("v1", "pods", NS, "app=ev")[0])
    assert sorted(e["message"] for e in created) == [f"Created pod: {p}" for p in pods]
    pod_events = c.list("v1", "events", NS, field_selector=f"involvedObject.name={pods[0]}")[0]
    reasons = [e["reason"] for e in sorted(pod_events, key=lambda e: e["metadata"]["name"])]
    assert sorted(reasons) == ["Created", "Pulled", "Scheduled", "Started"]
    # the kubelet's in its order; the scheduler records Scheduled once the binding is stored
    # (schedule_one.go bindingCycle), and the kubelet, told of the binding by its watch, may record
    # its first event before that (whole-suite run 19)
    assert [r for r in reasons if r != "Scheduled"] == ["Pulled", "Created", "Started"]


def test_a_rollout_that_makes_no_progress_exceeds_its_deadline(no_node):
    c = no_node.client()
    c.create("apps/v1", "deployments", deployment("stuck", replicas=1, progressDeadlineSeconds=1), NS)

    def reason():
        d = c.get("apps/v1", "deployments", "stuck", NS)
        return next(((x["reason"], x["message"]) for x in d["status"].get("conditions", [])
                     if x["type"] == "Progressing"), (None, None))
    assert wait_until(lambda: replicasets(c, "stuck"), timeout=10)
    rs = next(iter(replicasets(c, "stuck").values()))["metadata"]["name"]
    # reason and message of one read: on a loaded machine the ReplicaSet's status (its first
    # replica) can come after the 1 s deadline, and that progress makes the condition "is
    # progressing" again until the deadline passes anew, as upstream's syncRolloutStatus does
    seen = []
    assert wait_until(lambda: seen.append(reason()) or seen[-1] == (
        "ProgressDeadlineExceeded", f'ReplicaSet "{rs}" has timed out progressing.'), timeout=10), seen[-3:]


def test_a_pod_create_an_admission_webhook_refused_is_retried_once_the_webhook_is_gone(server):
    """replica_set.go: syncReplicaSet returns manageReplicas' error and the key is requeued with the
    rate limiter's backoff; the Pod appears after the refusing webhook is removed, with nothing
    else touching the ReplicaSet."""
    c = server.client()
    webhook = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "deny-pods"},
               "webhooks": [{"name": "deny.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                             "failurePolicy": "Fail", "timeoutSeconds": 1,
                             "clientConfig": {"url": "https://127.0.0.1:1/deny"},
                             "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                        "resources": ["pods"]}]}]}
    c.create("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", webhook)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "retry", "namespace": NS},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "retry"}},
                   "template": {"metadata": {"labels": {"app": "retry"}},
                                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}
    c.create("apps/v1", "replicasets", rs, NS)

    def failure():
        got = c.get("apps/v1", "replicasets", "retry", NS)
        return next((x for x in (got.get("status") or {}).get("conditions") or [] if x["type"] == "ReplicaFailure"), None)
    assert wait_until(failure, timeout=30), "the refused create left no ReplicaFailure condition"
    assert "deny.example.com" in failure()["message"], failure()
    assert not c.list("v1", "pods", NS, "app=retry")[0]
    retried = lambda: [e for e in server.decisions.recent() if e.get("controller") == replicaset.CONTROLLER
                       and e.get("action") == "error" and "default/retry" in e.get("message", "")]
    assert wait_until(lambda: len(retried()) >= 2, timeout=30), "the refused create was not retried with backoff"
    c.delete("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "deny-pods")
    assert wait_until(lambda: c.list("v1", "pods", NS, "app=retry")[0], timeout=60), \
        "the ReplicaSet never created its Pod after the webhook was removed"
    assert wait_until(lambda: failure() is None, timeout=30), "the ReplicaFailure condition stayed"
