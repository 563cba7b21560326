"""The Deployment controller against the server's writes: ReplicaSets exist per pod template, and
no way of rewriting an unchanged Deployment (replace, every patch type, apply) makes a new one."""

from __future__ import annotations

import copy
import threading

import pytest

from labkit.apiserver.errors import ApiError
from labkit.apiserver.server import EmbeddedServer
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
                             controllers=["deployment", "replicaset", "node", "garbagecollector"]).start()
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
    generation = c.get("apps/v1", "deployments", "web", NS)["metadata"]["generation"]

    # kubectl replace -f of the manifest (no defaults, no resourceVersion)
    assert c.request("PUT", path, body=MANIFEST)[0] == 200
    # kubectl edit / replace of `kubectl get -o yaml` output as older servers wrote it
    live = c.get("apps/v1", "deployments", "web", NS)
    live["spec"]["template"]["metadata"]["creationTimestamp"] = None
    live["spec"]["template"]["spec"]["containers"][0]["args"] = []
    assert c.request("PUT", path, body=live)[0] == 200
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
    assert c.get("apps/v1", "deployments", "web", NS)["metadata"]["generation"] == generation


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
