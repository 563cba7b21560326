"""RBAC over real HTTPS with real kubectl: a user from the token file (kube-apiserver's
--token-auth-file format), `kubectl auth can-i` as that user and as the admin with `--as`,
the 403 body word for word, a RoleBinding to the `view` ClusterRole, an escalation refused,
and a ClusterRole labelled aggregate-to-view widening `view`."""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import urllib.error
import urllib.request

import pytest

from labkit.apiserver import audit, certs
from labkit.apiserver.process import ADMIN_GROUP, ADMIN_USER
import support
from support import embedded_server, wait_until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

ALICE_TOKEN = secrets.token_urlsafe(24)
ADMIN_TOKEN = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tokens = f'{ADMIN_TOKEN},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"\n{ALICE_TOKEN},alice,alice-uid\n'
    with embedded_server(tmp_path_factory.mktemp("apiserver"), tmp_path_factory.mktemp("home"),
                         controllers=["clusterrole-aggregation", "namespace"], tokens=tokens) as srv:
        yield srv


def kubectl(server, *args, user: str = "admin"):
    return support.kubectl(server, *args, token=ALICE_TOKEN if user == "alice" else None)


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_rbac_with_real_kubectl(server):
    ok(kubectl(server, "create", "namespace", "dev"))
    # can-i: the admin (kubeadm:cluster-admins → cluster-admin) may, alice may not, as herself or impersonated
    assert ok(kubectl(server, "auth", "can-i", "list", "pods", "-n", "dev")) == "yes\n"
    for args in (("--as", "alice"), ()):
        result = kubectl(server, "auth", "can-i", "list", "pods", "-n", "dev", *args,
                         user="admin" if args else "alice")
        assert (result.returncode, result.stdout) == (1, "no\n")
    assert ok(kubectl(server, "auth", "can-i", "create", "selfsubjectaccessreviews", user="alice")) == "yes\n"

    # the 403: kubectl's line, and the body byte for byte
    result = kubectl(server, "get", "pods", "-n", "dev", user="alice")
    assert result.stderr == ('Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource '
                             '"pods" in API group "" in the namespace "dev"\n')
    request = urllib.request.Request(f"{server.url}/api/v1/namespaces/dev/pods",
                                     headers={"Authorization": f"Bearer {ALICE_TOKEN}"})
    context = ssl.create_default_context(cafile=str(server.pki / certs.CA_CERT))
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, context=context, timeout=10)
    assert exc.value.code == 403
    assert exc.value.read() == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
                                b'"pods is forbidden: User \\"alice\\" cannot list resource \\"pods\\" in API group '
                                b'\\"\\" in the namespace \\"dev\\"","reason":"Forbidden","details":{"kind":"pods"},'
                                b'"code":403}\n')

    # the decision is in the request's audit event
    events = [e for e in audit.read(server.state_dir / "audit.log") if e["user"]["username"] == "alice"
              and e["requestURI"].startswith("/api/v1/namespaces/dev/pods")]
    assert events and all(e["annotations"] == {"authorization.k8s.io/decision": "forbid",
                                               "authorization.k8s.io/reason": ""} for e in events)
    # impersonation needs its own right
    result = kubectl(server, "get", "pods", "-n", "dev", "--as", "bob", user="alice")
    assert result.stderr == ('Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate '
                             'resource "users" in API group "" at the cluster scope\n')

    # a RoleBinding to view: alice reads dev, and only reads it
    ok(kubectl(server, "create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", "-n", "dev"))
    assert kubectl(server, "get", "pods", "-n", "dev", user="alice").stderr == "No resources found in dev namespace.\n"
    assert ok(kubectl(server, "auth", "can-i", "watch", "deployments.apps", "-n", "dev", "--as", "alice")) == "yes\n"
    # a namespace's own URL is in that namespace: the RoleBinding lets her read it, not others
    assert ok(kubectl(server, "get", "namespace", "dev", "-o", "name", user="alice")) == "namespace/dev\n"
    assert kubectl(server, "get", "namespace", "default", user="alice").returncode == 1
    for args in (("delete", "pods", "-n", "dev"), ("get", "secrets", "-n", "dev"), ("list", "pods", "-n", "default")):
        assert kubectl(server, "auth", "can-i", *args, "--as", "alice").stdout == "no\n", args
    listing = ok(kubectl(server, "auth", "can-i", "--list", "-n", "dev", "--as", "alice"))
    assert any(line.startswith("pods ") and line.endswith("[get list watch]") for line in listing.splitlines())
    # --as-group: impersonating a group adds its rights
    assert ok(kubectl(server, "auth", "can-i", "delete", "nodes", "--as", "alice", "--as-group",
                      "kubeadm:cluster-admins")) == "yes\n"

    # escalation: alice may write Roles and RoleBindings in dev, but grant only what she holds
    ok(kubectl(server, "create", "role", "rbac-writer", "--verb=create,get", "--resource=roles,rolebindings",
               "-n", "dev"))
    ok(kubectl(server, "create", "rolebinding", "alice-rbac", "--role=rbac-writer", "--user=alice", "-n", "dev"))
    ok(kubectl(server, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "dev", user="alice"))
    result = kubectl(server, "create", "role", "pod-killer", "--verb=delete", "--resource=pods", "-n", "dev",
                     user="alice")
    assert result.stderr == ('Error from server (Forbidden): roles.rbac.authorization.k8s.io "pod-killer" is forbidden: '
                             'user "alice" (groups=["system:authenticated"]) is attempting to grant RBAC permissions '
                             'not currently held:\n{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}\n')
    result = kubectl(server, "create", "rolebinding", "alice-admin", "--clusterrole=admin", "--user=alice",
                     "-n", "dev", user="alice")
    assert result.returncode == 1 and "is attempting to grant RBAC permissions not currently held" in result.stderr

    # aggregation: a ClusterRole labelled aggregate-to-view widens view (and with it, alice)
    assert kubectl(server, "auth", "can-i", "list", "leases.coordination.k8s.io", "-n", "dev",
                   "--as", "alice").stdout == "no\n"
    ok(kubectl(server, "create", "clusterrole", "lease-viewer", "--verb=get,list,watch",
               "--resource=leases.coordination.k8s.io"))
    ok(kubectl(server, "label", "clusterrole", "lease-viewer", "rbac.authorization.k8s.io/aggregate-to-view=true"))
    wait_until(lambda: kubectl(server, "auth", "can-i", "list", "leases.coordination.k8s.io", "-n", "dev",
                               "--as", "alice").stdout == "yes\n", timeout=10)
    view = json.loads(ok(kubectl(server, "get", "clusterrole", "view", "-o", "json")))
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "list", "watch"]} in view["rules"]
    edit = json.loads(ok(kubectl(server, "get", "clusterrole", "edit", "-o", "json")))
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "list", "watch"]} in edit["rules"]
