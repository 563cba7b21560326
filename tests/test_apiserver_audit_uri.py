"""The audit event's requestURI is the request's path and query as the client sent them
(audit/request.go NewEventFromRequest: req.URL.RequestURI()): still percent-encoded, repeated
keys kept. Before, labkit rebuilt it from the decoded query, losing both."""

from __future__ import annotations

import shutil

import pytest

import support
from labkit.apiserver import audit
from support import embedded_server


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_audited_request_uri_is_the_one_sent(tmp_path):
    uri = "/api/v1/namespaces/default/configmaps?labelSelector=app%3Dweb%2Ctier&limit=5&limit=6"
    with embedded_server(tmp_path / "state", tmp_path / "home", controllers=[]) as server:
        r = support.kubectl(server, "get", "--raw", uri)
        assert r.returncode == 0, r.stderr
        server.audit.close()
        events = [e for e in audit.read(server.state_dir / "audit.log")
                  if e.get("objectRef", {}).get("resource") == "configmaps" and e["verb"] == "list"]
    assert events and {e["requestURI"] for e in events} == {uri}
