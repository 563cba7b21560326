"""The access review APIs (`kubectl auth can-i`, `auth can-i --list`, `auth whoami`) and
impersonation answer what the server's authorizer decides for real requests."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s, config as k8s_config

from labkit.apiserver import bootstrappolicy
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.handler import Api
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.server import ADMIN_USER, EmbeddedServer
from labkit.apiserver.storage import Store
from support import host_lock

AUTHZ = "authorization.k8s.io/v1"


@pytest.fixture
def api(tmp_path):
    """A server with the default RBAC policy (no controllers: the aggregated roles stay empty)."""
    store = Store(tmp_path / "objects.db")
    api = Api(Registry(store))
    root = LocalClient(api, "admin", ["system:masters", "system:authenticated"])
    bootstrappolicy.ensure(root)
    root.create("v1", "namespaces", {"metadata": {"name": "ns"}})
    yield api
    store.close()


def root(api):
    return LocalClient(api, "admin", ["system:masters", "system:authenticated"])


def ssar(client, spec):
    return client.create(AUTHZ, "selfsubjectaccessreviews", {"spec": spec})["status"]


def outcome(client, method, path):
    """What the server answers the request itself: allowed unless 403."""
    code, body = client.request(method, path)
    return code != 403, body


@pytest.mark.parametrize("groups", [["system:masters", "system:authenticated"], ["system:authenticated"]])
def test_can_i_answers_what_the_request_gets(api, groups):
    me = LocalClient(api, "alice", groups)
    questions = [
        ({"resourceAttributes": {"verb": "list", "resource": "configmaps", "namespace": "ns"}},
         "GET", "/api/v1/namespaces/ns/configmaps"),
        ({"resourceAttributes": {"verb": "get", "group": "apps", "resource": "deployments", "subresource": "scale",
                                 "namespace": "ns", "name": "web"}},
         "GET", "/apis/apps/v1/namespaces/ns/deployments/web/scale"),
        ({"nonResourceAttributes": {"verb": "get", "path": "/labkit/v1/controllers"}},
         "GET", "/labkit/v1/controllers"),
        ({"nonResourceAttributes": {"verb": "get", "path": "/version"}}, "GET", "/version"),
    ]
    for spec, method, path in questions:
        status = ssar(me, spec)
        allowed, body = outcome(me, method, path)
        assert status["allowed"] == allowed, (spec, status, body)
        if not allowed:       # RBAC has no opinion and gives no reason
            assert "reason" not in status
            assert body["message"].endswith(" in the namespace \"ns\"") or body["message"] == \
                f'forbidden: User "alice" cannot get path "{path}"'
    masters = "system:masters" in groups
    assert [ssar(me, q[0])["allowed"] for q in questions] == [masters, masters, masters, True]


def test_subject_access_reviews_name_the_user_and_local_ones_a_namespace(api):
    admin = root(api)
    review = admin.create(AUTHZ, "subjectaccessreviews", {"spec": {
        "user": "bob", "nonResourceAttributes": {"verb": "get", "path": "/labkit/v1/controllers"}}})
    assert review["status"] == {"allowed": False}
    review = admin.create(AUTHZ, "subjectaccessreviews", {"spec": {
        "user": "bob", "groups": ["system:masters"], "nonResourceAttributes": {"verb": "get",
                                                                               "path": "/labkit/v1/controllers"}}})
    assert review["status"] == {"allowed": True}
    # exactly the groups asked about: without system:authenticated, not even /version
    review = admin.create(AUTHZ, "subjectaccessreviews", {"spec": {
        "user": "bob", "nonResourceAttributes": {"verb": "get", "path": "/apis"}}})
    assert review["status"] == {"allowed": False}
    review = admin.create(AUTHZ, "subjectaccessreviews", {"spec": {
        "user": "bob", "groups": ["system:authenticated"], "nonResourceAttributes": {"verb": "get", "path": "/apis"}}})
    assert review["status"] == {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "system:discovery" '
                                                           'of ClusterRole "system:discovery" to Group '
                                                           '"system:authenticated"'}
    lsar = {"spec": {"user": "bob", "resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "ns"}}}
    review = admin.create(AUTHZ, "localsubjectaccessreviews", lsar, "ns")
    assert review["metadata"]["namespace"] == "ns" and review["status"]["allowed"] is False
    admin.create("rbac.authorization.k8s.io/v1", "roles", {"metadata": {"name": "pod-deleter"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}]}, "ns")
    admin.create("rbac.authorization.k8s.io/v1", "rolebindings", {
        "metadata": {"name": "bob"}, "subjects": [{"kind": "User", "name": "bob"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-deleter"}}, "ns")
    review = admin.create(AUTHZ, "localsubjectaccessreviews", lsar, "ns")
    assert review["status"] == {"allowed": True,
                                "reason": 'RBAC: allowed by RoleBinding "bob/ns" of Role "pod-deleter" to User "bob"'}
    # only those allowed to create SubjectAccessReviews may ask about others
    with pytest.raises(ApiError) as exc:
        LocalClient(api, "alice").create(AUTHZ, "subjectaccessreviews", lsar)
    assert exc.value.code == 403


@pytest.mark.parametrize("resource, namespace, body, message", [
    ("selfsubjectaccessreviews", None, {"spec": {}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: null: '
     'exactly one of nonResourceAttributes or resourceAttributes must be specified'),
    ("selfsubjectaccessreviews", None, {"spec": {"resourceAttributes": {"verb": "get"},
                                                 "nonResourceAttributes": {"verb": "get", "path": "/"}}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: '
     '{"path":"/","verb":"get"}: cannot be specified in combination with resourceAttributes'),
    ("selfsubjectaccessreviews", None, {"metadata": {"name": "q"}, "spec": {"resourceAttributes": {"verb": "get"}}},
     'SelfSubjectAccessReview.authorization.k8s.io "q" is invalid: metadata: Invalid value: '
     '{"name":"q","creationTimestamp":null}: must be empty'),
    ("selfsubjectaccessreviews", None, {"spec": {"resourceAttributes": {"verb": "list", "labelSelector": {}}}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes.labelSelector.requirements: '
     'Required value: when spec.resourceAttributes.labelSelector is specified, requirements or rawSelector is '
     'required'),
    ("subjectaccessreviews", None, {"spec": {"resourceAttributes": {"verb": "get"}}},
     'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user '
     'or group must be specified'),
    ("localsubjectaccessreviews", "ns", {"spec": {"user": "bob", "resourceAttributes": {"verb": "get",
                                                                                        "namespace": "other"}}},
     'LocalSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid '
     'value: "other": must match metadata.namespace'),
    ("localsubjectaccessreviews", "ns", {"spec": {"user": "bob", "nonResourceAttributes": {"verb": "get"}}},
     'LocalSubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: Invalid value: '
     '{"verb":"get"}: disallowed on this kind of request'),
])
def test_invalid_reviews_are_refused_with_upstreams_messages(api, resource, namespace, body, message):
    with pytest.raises(ApiError) as exc:
        root(api).create(AUTHZ, resource, body, namespace)
    assert exc.value.code == 422 and exc.value.message == message


def test_reviews_are_answered_not_stored(api):
    me = LocalClient(api, "alice")
    revision = api.registry.store.list("/namespaces")[1]
    ssar(me, {"resourceAttributes": {"verb": "get", "resource": "pods"}})
    me.create("authentication.k8s.io/v1", "selfsubjectreviews", {})
    assert api.registry.store.list("/namespaces")[1] == revision        # nothing was written
    # authorization comes before routing: alice may not list them or unknown things, an admin learns why not
    assert me.request("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")[0] == 403
    code, body = me.request("GET", "/api/v1/namespaces/ns/nosuchthings")
    assert (code, body["message"]) == (403, 'nosuchthings is forbidden: User "alice" cannot list resource '
                                            '"nosuchthings" in API group "" in the namespace "ns"')
    assert root(api).request("GET", "/api/v1/namespaces/ns/nosuchthings")[0] == 404
    code, body = root(api).request("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert code == 405 and body["reason"] == "MethodNotAllowed"


def test_rules_review_lists_what_the_authorizer_allows(api):
    rules = LocalClient(api, "alice").create(AUTHZ, "selfsubjectrulesreviews", {"spec": {"namespace": "ns"}})["status"]
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in rules["resourceRules"]
    urls = [u for r in rules["nonResourceRules"] for u in r["nonResourceURLs"]]
    assert "/version" in urls and "/apis/*" in urls and not [u for u in urls if u.startswith("/labkit")]
    assert rules["incomplete"] is False and "evaluationError" not in rules
    rules = root(api).create(AUTHZ, "selfsubjectrulesreviews", {"spec": {"namespace": "ns"}})["status"]
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in rules["resourceRules"]
    assert {"verbs": ["*"], "nonResourceURLs": ["*"]} in rules["nonResourceRules"]


def test_whoami_and_impersonation_over_https(tmp_path):
    with host_lock(False):
        server = EmbeddedServer(tmp_path / "apiserver", controllers=[]).start()
    try:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(str(server.kubeconfig), client_configuration=configuration)
        with k8s.ApiClient(configuration) as api:
            me = k8s.AuthenticationV1Api(api).create_self_subject_review(k8s.V1SelfSubjectReview())
            assert me.status.user_info.username == ADMIN_USER
            assert me.status.user_info.groups == ["kubeadm:cluster-admins", "system:authenticated"]
            k8s.RbacAuthorizationV1Api(api).create_namespaced_role_binding("default", {
                "metadata": {"name": "robot-edits"}, "subjects": [{"kind": "ServiceAccount", "name": "robot",
                                                                  "namespace": "ns"}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "system:aggregate-to-edit"}})
            api.set_default_header("Impersonate-User", "system:serviceaccount:ns:robot")
            api.set_default_header("Impersonate-Group", "team")
            api.set_default_header("Impersonate-Uid", "1234")
            who = k8s.AuthenticationV1Api(api).create_self_subject_review(k8s.V1SelfSubjectReview()).status.user_info
            assert (who.username, who.uid) == ("system:serviceaccount:ns:robot", "1234")
            assert who.groups == ["team", "system:authenticated"]      # groups asked for: not the SA's
            del api.default_headers["Impersonate-Group"]
            who = k8s.AuthenticationV1Api(api).create_self_subject_review(k8s.V1SelfSubjectReview()).status.user_info
            assert who.groups == ["system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"]
            # the impersonated user is not an admin
            with pytest.raises(k8s.ApiException) as exc:
                api.call_api("/labkit/v1/controllers", "GET", auth_settings=["BearerToken"],
                             response_type="object", _preload_content=True)
            assert exc.value.status == 403
            created = k8s.CoreV1Api(api).create_namespaced_config_map("default", k8s.V1ConfigMap(
                metadata=k8s.V1ObjectMeta(name="made-by-robot"), data={"a": "b"}))
            assert created.metadata.managed_fields[0].manager.startswith("OpenAPI-Generator")
            del api.default_headers["Impersonate-Uid"]
            del api.default_headers["Impersonate-User"]
            api.set_default_header("Impersonate-Group", "team")
            with pytest.raises(k8s.ApiException) as exc:
                k8s.CoreV1Api(api).list_namespace()
            # filters/impersonation.go: responsewriters.InternalError, in plain text
            assert exc.value.status == 500
            assert exc.value.body == ('Internal Server Error: "/api/v1/namespaces": requested [{Group  team    }] '
                                      "without impersonating a user\n")
    finally:
        with host_lock(False):
            server.stop()


def test_each_request_keeps_a_trace_under_its_audit_id(tmp_path):
    """The trace of a request is answered under the audit ID its audit event carries."""
    from labkit.apiserver import audit
    with host_lock(False):
        server = EmbeddedServer(tmp_path / "apiserver", controllers=[]).start()
    try:
        client = server.client()
        client.check(*client.request("GET", "/api/v1/namespaces/default/configmaps"))
        events = [e for e in audit.read(server.state_dir / "audit.log")
                  if e["requestURI"] == "/api/v1/namespaces/default/configmaps"]
        assert len(events) == 1
        code, trace = client.request("GET", f"/labkit/v1/traces/{events[0]['auditID']}")
        assert code == 200 and trace["auditID"] == events[0]["auditID"]
        assert trace["annotations"] == events[0].get("annotations", {})
        code, newest = client.request("GET", "/labkit/v1/traces", {"limit": "50"})
        assert code == 200 and events[0]["auditID"] in [t["auditID"] for t in newest["items"]]
        assert client.request("GET", "/labkit/v1/traces/no-such-id")[0] == 404
        # a review is answered, not stored, and its trace says so
        client.create(AUTHZ, "selfsubjectaccessreviews",
                      {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
        review = [e for e in audit.read(server.state_dir / "audit.log")
                  if e["requestURI"].endswith("/selfsubjectaccessreviews")][-1]
        steps = client.request("GET", f"/labkit/v1/traces/{review['auditID']}")[1]["steps"]
        assert [(s["stage"], s["outcome"]) for s in steps if s["stage"] == "storage"] == [("storage", "not stored")]
        assert client.request("GET", "/labkit/v1/traces", {"limit": "lots"})[0] == 400
    finally:
        with host_lock(False):
            server.stop()
