"""Discovery as client-go's discovery client does it since aggregated discovery: two GETs (/api and
/apis) for every resource of every group, where labkit's controllers once walked one GET per
group/version; a server that only has the legacy lists still gets the walk. The garbage
collector's periodic sync makes one discovery serve the mapper and the monitors."""

from __future__ import annotations

from labkit.apiserver.client import Client
from labkit.apiserver.server import EmbeddedServer
from support import host_lock


class Counting:
    """A client's requests, counted."""

    def __init__(self, client):
        self.client, self.paths = client, []
        original = client.request

        def request(method, path, *args, **kwargs):
            self.paths.append((method, path))
            return original(method, path, *args, **kwargs)
        client.request = request


def test_one_discovery_is_two_requests_and_finds_what_the_legacy_walk_finds(tmp_path):
    with host_lock(False):
        server = EmbeddedServer(tmp_path / "apiserver", controllers=[]).start()
    try:
        client = server.client()
        counted = Counting(client)
        found = client.discover()
        assert counted.paths == [("GET", "/api"), ("GET", "/apis")]
        legacy = Client._walk_legacy
        counted.paths.clear()
        walked = []
        for path in ("/api", "/apis"):          # the same server's legacy lists, walked
            code, body = client.request("GET", path)
            walked.append((path, body))
        resources, failed, preferred = [], {}, {"": "v1"}
        legacy(client, walked, resources, failed, preferred)
        assert len(counted.paths) > 10                      # one GET per group/version
        assert sorted(map(str, resources)) == sorted(map(str, found.resources))
        assert preferred == found.preferred and failed == found.failed == {}
        assert ("apps", "v1", "deployments") in {(r.group, r.version, r.resource) for r in found.resources}
    finally:
        with host_lock(False):
            server.stop()


def test_a_server_without_aggregated_discovery_gets_the_legacy_walk():
    class Legacy(Client):
        def __init__(self):
            self.asked = []

        def request(self, method, path, query=None, body=None, content_type=None, accept=None):
            self.asked.append(path)
            answers = {"/api": {"kind": "APIVersions", "versions": ["v1"]},
                       "/apis": {"kind": "APIGroupList", "groups": [
                           {"name": "apps", "versions": [{"groupVersion": "apps/v1"}],
                            "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}}]},
                       "/api/v1": {"resources": [{"name": "pods", "kind": "Pod", "namespaced": True, "verbs": ["get"]},
                                                 {"name": "pods/status", "kind": "Pod", "namespaced": True}]},
                       "/apis/apps/v1": {"resources": [{"name": "deployments", "kind": "Deployment",
                                                        "namespaced": True, "verbs": ["get"]}]}}
            return 200, answers[path]

    client = Legacy()
    found = client.discover()
    assert client.asked == ["/api", "/apis", "/api/v1", "/apis/apps/v1"]
    assert [(r.group, r.resource) for r in found.resources] == [("", "pods"), ("apps", "deployments")]
    assert found.preferred == {"": "v1", "apps": "v1"}
