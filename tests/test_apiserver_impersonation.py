"""Impersonation as filters/impersonation.go v1.34 does it: inside the audit filter (a refused
impersonation is audited and traced), groups without a user (a plain-text 500), the groups that
are added or not (system:authenticated, system:unauthenticated, anonymous), Impersonate-Extra-*
authorized on userextras/<key>."""

from __future__ import annotations

import functools
import http.client
import json
import secrets
import shutil

import pytest

from labkit.apiserver import audit
from labkit.apiserver.client import HttpClient
from labkit.apiserver.impersonation import WithoutUser, requests_from_headers
from labkit.apiserver.process import ADMIN_GROUP, ADMIN_USER
import support
from support import embedded_server

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

ALICE_TOKEN = secrets.token_urlsafe(24)
ADMIN_TOKEN = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tokens = f'{ADMIN_TOKEN},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"\n{ALICE_TOKEN},alice,alice-uid\n'
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home"), controllers=[],
                         tokens=tokens) as srv:
        yield srv


kubectl = functools.partial(support.kubectl, token=ADMIN_TOKEN)


def send(server, method: str, path: str, headers: list[tuple[str, str]], token: str = ADMIN_TOKEN,
         body: dict | None = None):
    """One request with its headers sent as given, repeated names repeated (urllib would fold
    them): (code, content type, body bytes)."""
    client = HttpClient.for_embedded(server.kubeconfig)
    connection = http.client.HTTPSConnection(client.host, client.port, context=client.ssl_context)
    data = json.dumps(body).encode() if body is not None else b""
    connection.putrequest(method, path)
    for name, value in [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json"),
                        ("Content-Length", str(len(data))), *headers]:
        connection.putheader(name, value)
    connection.endheaders(data)
    response = connection.getresponse()
    answer = response.status, response.getheader("Content-Type"), response.read()
    connection.close()
    return answer


def test_groups_without_a_user():
    with pytest.raises(WithoutUser) as info:
        requests_from_headers([("impersonate-group", "team"), ("impersonate-uid", "7")])
    assert str(info.value) == ("requested [{Group  team    } {UID  7  authentication.k8s.io/v1  }] "
                               "without impersonating a user")


def test_groups_without_a_user_over_https(server):
    code, content_type, body = send(server, "GET", "/api/v1/namespaces", [("Impersonate-Group", "team")])
    assert (code, content_type) == (500, "text/plain; charset=utf-8")
    assert body.decode() == ('Internal Server Error: "/api/v1/namespaces": requested [{Group  team    }] '
                             "without impersonating a user\n")


def test_a_refused_impersonation_is_audited_and_traced(server):
    # (--raw: no discovery first, which alice-as-bob may not do either)
    result = kubectl(server, "get", "--raw", "/api/v1/namespaces/default/pods", "--as", "bob", token=ALICE_TOKEN)
    assert result.stderr.strip() == ('Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot '
                                     'impersonate resource "users" in API group "" at the cluster scope')
    events = [e for e in audit.read(server.state_dir / "audit.log")
              if e["requestURI"].startswith("/api/v1/namespaces/default/pods") and e["user"]["username"] == "alice"]
    assert events and events[-1]["stage"] == "ResponseComplete"
    assert events[-1]["responseStatus"]["code"] == 403 and not any("impersonatedUser" in e for e in events)
    trace = server.client().check(*server.client().request("GET", f"/labkit/v1/traces/{events[-1]['auditID']}"))
    denied = [s for s in trace["steps"] if s["stage"] == "impersonation"]
    assert [(s["name"], s["outcome"]) for s in denied] == [("authorizer", "denied")]


def test_impersonated_groups(server):
    # a group asked for that is system:unauthenticated keeps system:authenticated out
    who = json.loads(kubectl(server, "auth", "whoami", "-o", "json", "--as", "carol", "--as-group", "system:masters",
                             "--as-group", "system:unauthenticated").stdout)["status"]["userInfo"]
    assert who == {"username": "carol", "groups": ["system:masters", "system:unauthenticated"]}
    who = json.loads(kubectl(server, "auth", "whoami", "-o", "json", "--as", "system:anonymous", "--as-group",
                             "system:masters").stdout)["status"]["userInfo"]
    assert who == {"username": "system:anonymous", "groups": ["system:masters", "system:unauthenticated"]}
    # the audit event names the impersonated user from the response on
    events = [e for e in audit.read(server.state_dir / "audit.log") if e.get("impersonatedUser", {}).get(
        "username") == "system:anonymous"]
    assert events and all(e["stage"] != "RequestReceived" for e in events)
    assert events[-1]["user"]["username"] == ADMIN_USER


def test_impersonated_extras(server):
    def whoami(token: str, headers: list[tuple[str, str]]):
        code, _, body = send(server, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", headers, token,
                             {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        return code, json.loads(body)

    extras = [("Impersonate-User", "dave"), ("Impersonate-Extra-Scopes", "view"),
              ("Impersonate-Extra-Scopes", "edit"), ("Impersonate-Extra-Example.com%2fteam", "blue")]
    code, answer = whoami(ADMIN_TOKEN, extras)
    assert code == 201
    assert answer["status"]["userInfo"] == {"username": "dave", "groups": ["system:authenticated"],
                                            "extra": {"scopes": ["view", "edit"], "example.com/team": ["blue"]}}
    kubectl(server, "create", "clusterrole", "as-dave", "--verb=impersonate", "--resource=users",
            "--resource-name=dave")
    kubectl(server, "create", "clusterrolebinding", "alice-as-dave", "--clusterrole=as-dave", "--user=alice")
    code, answer = whoami(ALICE_TOKEN, extras)
    assert code == 403
    assert answer["message"] == ('userextras.authentication.k8s.io "view" is forbidden: User "alice" cannot '
                                 'impersonate resource "userextras/scopes" in API group "authentication.k8s.io" '
                                 "at the cluster scope")
