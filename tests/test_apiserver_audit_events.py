"""What the audit events record of a request, as kube-apiserver v1.34's: the requestURI as sent,
the decoded object as requestObject, DeleteOptions only when they were the body."""

from __future__ import annotations

import shutil

import pytest

import support
from labkit.apiserver import audit
from support import embedded_server


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_the_audited_request_uri_is_the_one_sent(tmp_path):
    """audit/request.go NewEventFromRequest: req.URL.RequestURI(), still percent-encoded, repeated
    keys kept. Before, labkit rebuilt it from the decoded query, losing both."""
    uri = "/api/v1/namespaces/default/configmaps?labelSelector=app%3Dweb%2Ctier&limit=5&limit=6"
    with embedded_server(tmp_path / "state", tmp_path / "home", controllers=[]) as server:
        r = support.kubectl(server, "get", "--raw", uri)
        assert r.returncode == 0, r.stderr
        server.audit.close()
        events = [e for e in audit.read(server.state_dir / "audit.log")
                  if e.get("objectRef", {}).get("resource") == "configmaps" and e["verb"] == "list"]
    assert events and {e["requestURI"] for e in events} == {uri}


def test_delete_options_are_the_request_object_only_when_sent_as_a_body(tmp_path):
    """handlers/delete.go: audit.LogRequestObject runs on DeleteOptions decoded from a body; a
    DELETE without one (options in the query, or none) has no requestObject. Before, labkit
    logged a DeleteOptions for every delete."""
    import yaml
    from labkit.apiserver.auditpolicy import Policy
    from support import admin_client, in_process_api
    with in_process_api(tmp_path / "objects.db") as api:
        api.audit = audit.AuditLog(tmp_path / "audit.log")
        api.audit_policy = Policy.from_dict(yaml.safe_load(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n"))
        c = admin_client(api)
        for name in ("plain", "queried", "bodied"):
            c.create("v1", "configmaps", {"metadata": {"name": name}}, "ns")
        c.request("DELETE", "/api/v1/namespaces/ns/configmaps/plain")
        c.request("DELETE", "/api/v1/namespaces/ns/configmaps/queried", {"gracePeriodSeconds": "0"})
        c.request("DELETE", "/api/v1/namespaces/ns/configmaps/bodied", None,
                  {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
        api.audit.close()
        logged = {e["objectRef"]["name"]: e.get("requestObject") for e in audit.read(tmp_path / "audit.log")
                  if e["verb"] == "delete" and e["stage"] == "ResponseComplete"}
    assert logged["plain"] is None and logged["queried"] is None
    assert logged["bodied"]["kind"] == "DeleteOptions" and logged["bodied"]["propagationPolicy"] == "Background"


def test_the_request_object_is_the_decoded_defaulted_object(tmp_path):
    """create.go / update.go: audit.LogRequestObject runs on the object the decoder made (defaults
    applied, a Secret's stringData merged into data, unknown fields dropped), not the body as sent."""
    import yaml
    from labkit.apiserver.auditpolicy import Policy
    from support import admin_client, in_process_api
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "bogus": 1,
                           "template": {"metadata": {"labels": {"a": "b"}},
                                        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    with in_process_api(tmp_path / "objects.db") as api:
        api.audit = audit.AuditLog(tmp_path / "audit.log")
        api.audit_policy = Policy.from_dict(yaml.safe_load(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n"))
        c = admin_client(api)
        c.request("POST", "/apis/apps/v1/namespaces/ns/deployments", None, deployment)
        c.request("POST", "/api/v1/namespaces/ns/secrets", None,
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}})
        api.audit.close()
        logged = {e["objectRef"]["name"]: e["requestObject"] for e in audit.read(tmp_path / "audit.log")
                  if e["verb"] == "create" and e["stage"] == "ResponseComplete"}
    spec = logged["web"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "RollingUpdate" and "bogus" not in spec
    assert logged["s"].get("data") == {"k": "dg=="} and "stringData" not in logged["s"]
