"""RBAC as kube-apiserver evaluates it, with cases ported from upstream's tests:
plugin/pkg/auth/authorizer/rbac/rbac_test.go (TestAuthorizer, TestRuleMatches),
component-helpers/auth/rbac/validation/policy_comparator_test.go (Covers),
pkg/registry/rbac/validation/rule_test.go (ConfirmNoEscalation, appliesTo),
pkg/registry/rbac/*/policybased (escalation checks),
pkg/controller/clusterroleaggregation/clusterroleaggregation_controller_test.go (syncClusterRole),
staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors_test.go (TestForbidden)."""

from __future__ import annotations

import pytest

from labkit.apiserver import bootstrappolicy
from labkit.apiserver.authorizer import Attributes, Authorizer, forbidden_error, require
from labkit.apiserver.client import LocalClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.escalation import compact_rules, compact_string, confirm_no_escalation, covers
from labkit.apiserver.handler import Api
from labkit.apiserver.http import encode
from labkit.apiserver.rbac import RBACAuthorizer, RuleResolver, rule_allows
from labkit.apiserver.registry.store import Registry
from labkit.apiserver.storage import Store
from labkit.apiserver.trace import Trace
from labkit.controllers.clusterroleaggregation import aggregate

RBAC = "rbac.authorization.k8s.io/v1"
G = "rbac.authorization.k8s.io"


# -- helpers (rbac_test.go newRule, newClusterRole, newRoleBinding, newClusterRoleBinding) --------------

def new_rule(verbs: str, groups: str, resources: str, urls: str) -> dict:
    """newRule: comma-separated lists, an empty string being one empty element as strings.Split makes it."""
    return {"verbs": verbs.split(","), "apiGroups": groups.split(","), "resources": resources.split(","),
            "nonResourceURLs": urls.split(",")}


def subjects(*specs: str) -> list[dict]:
    out = []
    for spec in specs:
        kind, name = spec.split(":", 1)
        subject = {"kind": kind, "name": name}
        if kind == "ServiceAccount":
            name, _, namespace = name.partition("/")
            subject = {"kind": kind, "name": name, **({"namespace": namespace} if namespace else {})}
        out.append(subject)
    return out


def put(store: Store, key: str, namespace: str, obj: dict) -> None:
    store.put(f"{G}/{key}", namespace, obj["metadata"]["name"], obj)


def cluster_role(store, name, *rules, labels=None, aggregation=None):
    obj = {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name, "labels": labels or {}},
           "rules": list(rules)}
    if aggregation:
        obj["aggregationRule"] = {"clusterRoleSelectors": aggregation}
    put(store, "clusterroles", "", obj)
    return obj


def role(store, namespace, name, *rules):
    put(store, "roles", namespace, {"kind": "Role", "metadata": {"name": name, "namespace": namespace},
                                    "rules": list(rules)})


def cluster_role_binding(store, name, role_name, *who):
    put(store, "clusterrolebindings", "", {"kind": "ClusterRoleBinding", "metadata": {"name": name},
                                           "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": role_name},
                                           "subjects": subjects(*who)})


def role_binding(store, namespace, name, kind, role_name, *who):
    put(store, "rolebindings", namespace, {"kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace},
                                           "roleRef": {"apiGroup": G, "kind": kind, "name": role_name},
                                           "subjects": subjects(*who)})


def attrs(user="", groups="", verb="", resource="", subresource="", namespace="", group="", name="", path=""):
    return Attributes(user, groups.split(",") if groups else [], verb, namespace, group, "", resource, subresource,
                      name, path)


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "objects.db")
    yield s
    s.close()


# -- rbac_test.go TestRuleMatches -----------------------------------------------------------------------

def res(verb, group, resource, subresource=""):
    return attrs(verb=verb, group=group, resource=resource, subresource=subresource)


def url(verb, path):
    return attrs(verb=verb, path=path)


RULE_CASES = [
    ("star verb, exact match other", {"verbs": ["*"], "apiGroups": ["group1"], "resources": ["resource1"]}, [
        (res("verb1", "group1", "resource1"), True), (res("verb1", "group2", "resource1"), False),
        (res("verb1", "group1", "resource2"), False), (res("verb1", "group2", "resource2"), False),
        (res("verb2", "group1", "resource1"), True), (res("verb2", "group2", "resource1"), False),
        (res("verb2", "group1", "resource2"), False), (res("verb2", "group2", "resource2"), False)]),
    ("star group, exact match other", {"verbs": ["verb1"], "apiGroups": ["*"], "resources": ["resource1"]}, [
        (res("verb1", "group1", "resource1"), True), (res("verb1", "group2", "resource1"), True),
        (res("verb1", "group1", "resource2"), False), (res("verb1", "group2", "resource2"), False),
        (res("verb2", "group1", "resource1"), False), (res("verb2", "group2", "resource1"), False),
        (res("verb2", "group1", "resource2"), False), (res("verb2", "group2", "resource2"), False)]),
    ("star resource, exact match other", {"verbs": ["verb1"], "apiGroups": ["group1"], "resources": ["*"]}, [
        (res("verb1", "group1", "resource1"), True), (res("verb1", "group2", "resource1"), False),
        (res("verb1", "group1", "resource2"), True), (res("verb1", "group2", "resource2"), False),
        (res("verb2", "group1", "resource1"), False), (res("verb2", "group2", "resource1"), False),
        (res("verb2", "group1", "resource2"), False), (res("verb2", "group2", "resource2"), False)]),
    ("tuple expansion", {"verbs": ["verb1", "verb2"], "apiGroups": ["group1", "group2"],
                         "resources": ["resource1", "resource2"]},
     [(res(v, g, r), True) for v in ("verb1", "verb2") for g in ("group1", "group2")
      for r in ("resource1", "resource2")]),
    ("subresource expansion", {"verbs": ["*"], "apiGroups": ["*"], "resources": ["resource1/subresource1"]}, [
        (res("verb1", "group1", "resource1", "subresource1"), True),
        (res("verb1", "group2", "resource1", "subresource2"), False),
        (res("verb1", "group1", "resource2", "subresource1"), False),
        (res("verb1", "group2", "resource2", "subresource1"), False),
        (res("verb2", "group1", "resource1", "subresource1"), True),
        (res("verb2", "group2", "resource1", "subresource2"), False),
        (res("verb2", "group1", "resource2", "subresource1"), False),
        (res("verb2", "group2", "resource2", "subresource1"), False)]),
    ("star nonresource, exact match other", {"verbs": ["verb1"], "nonResourceURLs": ["*"]},
     [(url("verb1", p), True) for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")]
     + [(url("verb2", p), False) for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")]),
    ("star nonresource subpath", {"verbs": ["verb1"], "nonResourceURLs": ["/foo/*"]}, [
        (url("verb1", "/foo"), False), (url("verb1", "/foo/bar"), True), (url("verb1", "/foo/baz"), True),
        (url("verb1", "/foo/bar/one"), True), (url("verb1", "/foo/baz/one"), True),
        (url("verb1", "/notfoo"), False), (url("verb1", "/notfoo/bar"), False), (url("verb1", "/notfoo/baz"), False),
        (url("verb1", "/notfoo/bar/one"), False), (url("verb1", "/notfoo/baz/one"), False)]),
    ("star verb, exact nonresource", {"verbs": ["*"], "nonResourceURLs": ["/foo", "/foo/bar/one"]},
     [(url(v, p), p in ("/foo", "/foo/bar/one")) for v in ("verb1", "verb2")
      for p in ("/foo", "/foo/bar", "/foo/baz", "/foo/bar/one", "/foo/baz/one")]),
    # beyond TestRuleMatches: resourceNames, `*/subresource`, and that `pods` is not `pods/log`
    ("resource names", {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"]}, [
        (attrs(verb="get", resource="configmaps", name="a"), True),
        (attrs(verb="get", resource="configmaps", name="b"), False),
        (attrs(verb="get", resource="configmaps"), False)]),
    ("star slash subresource", {"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/scale"]}, [
        (res("get", "apps", "deployments", "scale"), True), (res("get", "apps", "deployments"), False),
        (res("get", "apps", "deployments", "status"), False)]),
    ("resource without subresource", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, [
        (res("get", "", "pods"), True), (res("get", "", "pods", "log"), False)]),
]


@pytest.mark.parametrize("name,rule,requests", RULE_CASES, ids=[c[0] for c in RULE_CASES])
def test_rule_matches(name, rule, requests):
    for request, expected in requests:
        assert rule_allows(request, rule) is expected, (name, request)


# -- rbac_test.go TestAuthorizer ------------------------------------------------------------------------

def test_authorizer_rolebinding_to_clusterrole_is_scoped_to_its_namespace(store):
    cluster_role(store, "admin", new_rule("*", "*", "*", "*"))
    role_binding(store, "ns1", "admin", "ClusterRole", "admin", "User:admin", "Group:admins")
    rbac = RBACAuthorizer(store)
    for a in (attrs("admin", "", "get", "Pods", namespace="ns1"), attrs("admin", "", "watch", "Pods", namespace="ns1"),
              attrs("admin", "group1", "watch", "Foobar", namespace="ns1"),
              attrs("joe", "admins", "watch", "Foobar", namespace="ns1"),
              attrs("joe", "group1,admins", "watch", "Foobar", namespace="ns1")):
        assert rbac.authorize(a).allowed, a
    for a in (attrs("admin", "", "GET", "Pods", namespace="ns2"), attrs("admin", "", "GET", "Nodes"),
              attrs("admin", "admins", "GET", "Pods", namespace="ns2"), attrs("admin", "admins", "GET", "Nodes")):
        assert not rbac.authorize(a).allowed, a


def test_authorizer_non_resource_urls(store):
    cluster_role(store, "non-resource-url-getter", new_rule("get", "", "", "/apis"))
    cluster_role(store, "non-resource-url", new_rule("*", "", "", "/apis"))
    cluster_role(store, "non-resource-url-prefix", new_rule("get", "", "", "/apis/*"))
    cluster_role_binding(store, "non-resource-url-getter", "non-resource-url-getter", "User:foo", "Group:bar")
    cluster_role_binding(store, "non-resource-url", "non-resource-url", "User:admin", "Group:admin")
    cluster_role_binding(store, "non-resource-url-prefix", "non-resource-url-prefix", "User:prefixed", "Group:prefixed")
    rbac = RBACAuthorizer(store)
    allowed = [("foo", "", "get", "/apis"), ("", "bar", "get", "/apis"), ("admin", "", "get", "/apis"),
               ("", "admin", "get", "/apis"), ("admin", "", "watch", "/apis"), ("", "admin", "watch", "/apis"),
               ("prefixed", "", "get", "/apis/v1"), ("", "prefixed", "get", "/apis/v1"),
               ("prefixed", "", "get", "/apis/v1/foobar"), ("", "prefixed", "get", "/apis/v1/foorbar")]
    denied = [("foo", "", "watch", "/apis"), ("", "bar", "watch", "/apis"), ("foo", "", "get", "/api/v1"),
              ("", "bar", "get", "/api/v1"), ("admin", "", "get", "/api/v1"), ("", "admin", "get", "/api/v1"),
              ("prefixed", "", "get", "/api/v1"), ("", "prefixed", "get", "/api/v1")]
    for user, groups, verb, path in allowed:
        assert rbac.authorize(attrs(user, groups, verb, path=path)).allowed, (user, groups, verb, path)
    for user, groups, verb, path in denied:
        assert not rbac.authorize(attrs(user, groups, verb, path=path)).allowed, (user, groups, verb, path)


@pytest.mark.parametrize("rules,allowed,denied", [
    ([new_rule("*", "*", "pods", "*")], [("pods", "")], [("pods", "status")]),
    ([new_rule("*", "*", "pods/status", "*")], [("pods", "status")], [("pods", "")]),
])
def test_authorizer_subresources(store, rules, allowed, denied):
    cluster_role(store, "admin", *rules)
    role_binding(store, "ns1", "admin", "ClusterRole", "admin", "User:admin", "Group:admins")
    rbac = RBACAuthorizer(store)
    for resource, sub in allowed:
        assert rbac.authorize(attrs("admin", "", "get", resource, sub, "ns1")).allowed
    for resource, sub in denied:
        assert not rbac.authorize(attrs("admin", "", "get", resource, sub, "ns1")).allowed


# -- reasons (rule.go describers, rbac.go Authorize) -----------------------------------------------------

def test_reasons_name_the_binding_role_and_subject(store):
    cluster_role(store, "reader", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})
    role(store, "dev", "writer", {"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]})
    cluster_role_binding(store, "read-all", "reader", "User:alice")
    role_binding(store, "dev", "write-dev", "Role", "writer", "Group:devs", "ServiceAccount:robot")
    rbac = RBACAuthorizer(store)
    assert rbac.authorize(attrs("alice", "", "get", "pods", namespace="dev")).reason == \
        'RBAC: allowed by ClusterRoleBinding "read-all" of ClusterRole "reader" to User "alice"'
    assert rbac.authorize(attrs("bob", "devs", "create", "pods", namespace="dev")).reason == \
        'RBAC: allowed by RoleBinding "write-dev/dev" of Role "writer" to Group "devs"'
    # a ServiceAccount subject without a namespace is one of the binding's namespace
    assert rbac.authorize(attrs("system:serviceaccount:dev:robot", "", "create", "pods", namespace="dev")).reason == \
        'RBAC: allowed by RoleBinding "write-dev/dev" of Role "writer" to ServiceAccount "robot/dev"'
    assert not rbac.authorize(attrs("system:serviceaccount:other:robot", "", "create", "pods", namespace="dev")).allowed
    # no opinion: no reason at all, unless bindings point at roles that are not there
    denied = rbac.authorize(attrs("alice", "", "delete", "pods", namespace="dev"))
    assert (denied.allowed, denied.reason) == (False, "")
    cluster_role_binding(store, "dangling", "gone", "User:alice")
    role_binding(store, "dev", "dangling", "Role", "gone-too", "User:alice")
    assert rbac.authorize(attrs("alice", "", "delete", "pods", namespace="dev")).reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
        'role.rbac.authorization.k8s.io "gone-too" not found]')


def test_privileged_group_comes_first_and_rules_come_from_rbac(store):
    authorizer = Authorizer(store)
    decision = authorizer.authorize(attrs("root", "system:masters", "delete", "nodes"))
    assert (decision.allowed, decision.reason, decision.authorizer) == (True, "", "privileged group")
    cluster_role(store, "reader", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
                 {"verbs": ["get"], "nonResourceURLs": ["/healthz"]})
    role_binding(store, "dev", "read", "ClusterRole", "reader", "User:alice")
    rules = authorizer.rules("alice", [], "dev")
    assert rules.resource_rules == [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]
    assert rules.non_resource_rules == [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
    assert authorizer.rules("alice", [], "other").resource_rules == []


def test_require_writes_the_audit_annotations_and_a_trace_step(store):
    cluster_role(store, "reader", {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]})
    role_binding(store, "dev", "read", "ClusterRole", "reader", "User:alice")
    authorizer, trace = Authorizer(store), Trace()
    require(authorizer, attrs("alice", "", "list", "pods", namespace="dev"), trace)
    assert trace.annotations == {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason":
                                 'RBAC: allowed by RoleBinding "read/dev" of ClusterRole "reader" to User "alice"'}
    step = trace.steps[-1]
    assert (step.stage, step.name, step.outcome) == ("authorization", "RBAC", "allowed")
    assert step.data["binding"] == {"kind": "RoleBinding", "name": "read", "namespace": "dev"}
    trace = Trace()
    with pytest.raises(ApiError) as exc:
        require(authorizer, attrs("alice", "", "list", "pods", namespace="prod"), trace)
    assert exc.value.message == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
                                 'in the namespace "prod"')
    assert trace.annotations == {"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""}
    assert trace.steps[-1].outcome == "denied"


# -- errors_test.go TestForbidden ---------------------------------------------------------------------------

@pytest.mark.parametrize("attributes,body", [
    (attrs("NAME", verb="GET", path="/whatever"),
     '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \\"NAME\\" '
     'cannot GET path \\"/whatever\\"","reason":"Forbidden","details":{},"code":403}\n'),
    (attrs("NAME", verb="GET", path="/<script>"),
     '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \\"NAME\\" '
     'cannot GET path \\"/\\u0026lt;script\\u0026gt;\\"","reason":"Forbidden","details":{},"code":403}\n'),
    (attrs("NAME", verb="get", resource="pod"),
     '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pod is forbidden: User '
     '\\"NAME\\" cannot get resource \\"pod\\" in API group \\"\\" at the cluster scope","reason":"Forbidden",'
     '"details":{"kind":"pod"},"code":403}\n'),
    (attrs("NAME", verb="get", resource="pod", name="mypod"),
     '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pod \\"mypod\\" is forbidden: '
     'User \\"NAME\\" cannot get resource \\"pod\\" in API group \\"\\" at the cluster scope","reason":"Forbidden",'
     '"details":{"name":"mypod","kind":"pod"},"code":403}\n'),
    (attrs("NAME", verb="get", namespace="test", group="v2", resource="pod", subresource="quota"),
     '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pod.v2 is forbidden: User '
     '\\"NAME\\" cannot get resource \\"pod/quota\\" in API group \\"v2\\" in the namespace \\"test\\"",'
     '"reason":"Forbidden","details":{"group":"v2","kind":"pod"},"code":403}\n'),
])
def test_forbidden_bodies_are_upstreams_byte_for_byte(attributes, body):
    assert encode(forbidden_error(attributes, "").status()).decode() == body


# -- policy_comparator_test.go (Covers) ---------------------------------------------------------------------

def rule(verbs, groups=(), resources=(), names=(), urls=()):
    return {k: list(v) for k, v in (("verbs", verbs), ("apiGroups", groups), ("resources", resources),
                                    ("resourceNames", names), ("nonResourceURLs", urls)) if v}


@pytest.mark.parametrize("case,owner,covered,missing", [
    ("exact match", [rule(["get"], ["v1"], ["builds"])], True, []),
    ("subresource wildcard", [rule(["get"], ["v1"], ["*/scale"])], True, []),
    ("multiple rules covering one", [rule(["delete"], ["v1"], ["deployments"]), rule(["delete"], ["v1"], ["builds"]),
                                     rule(["update"], ["v1"], ["builds", "deployments"])], True, []),
    ("api group star", [rule(["get"], ["*"], ["builds"])], True, []),
    ("verb star", [rule(["*"], ["v1"], ["builds"])], True, []),
    ("resource star", [rule(["get"], ["v1"], ["*"])], True, []),
    ("missing verb", [rule(["get"], ["v1"], ["builds"])], False,
     [rule(["delete"], ["v1"], ["builds"])]),
    ("resource name enumeration does not cover all names", [rule(["get"], ["v1"], ["builds"], ["foo"])], False,
     [rule(["get"], ["v1"], ["builds"])]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_covers(case, owner, covered, missing):
    servants = {"exact match": [rule(["get"], ["v1"], ["builds"])],
                "subresource wildcard": [rule(["get"], ["v1"], ["builds/scale"])],
                "multiple rules covering one": [rule(["delete", "update"], ["v1"], ["builds", "deployments"])],
                "api group star": [rule(["get"], ["v1", "extensions"], ["builds"])],
                "verb star": [rule(["get", "watch", "delete"], ["v1"], ["builds"])],
                "resource star": [rule(["get"], ["v1"], ["builds", "pods", "pods/log"])],
                "missing verb": [rule(["get", "delete"], ["v1"], ["builds"])],
                "resource name enumeration does not cover all names": [rule(["get"], ["v1"], ["builds"])]}
    assert covers(owner, servants[case]) == (covered, missing)


def test_covers_resource_names_and_non_resource_urls():
    assert covers([rule(["get"], ["v1"], ["builds"])], [rule(["get"], ["v1"], ["builds"], ["foo", "bar"])])[0]
    assert covers([rule(["get"], ["v1"], ["builds"], ["foo", "bar"])], [rule(["get"], ["v1"], ["builds"], ["foo"])])[0]
    assert not covers([rule(["get"], ["v1"], ["builds"], ["foo"])], [rule(["get"], ["v1"], ["builds"], ["bar"])])[0]
    assert covers([rule(["get"], urls=["/apis/*"])], [rule(["get"], urls=["/apis/v1", "/apis/v1/foo"])])[0]
    assert not covers([rule(["get"], urls=["/apis/*"])], [rule(["get"], urls=["/apis"])])[0]
    assert covers([rule(["*"], urls=["*"])], [rule(["get", "post"], urls=["/healthz", "/version"])])[0]


def test_compact_rules_merge_verbs_of_one_resource():
    missing = [rule(["get"], [""], ["pods"]), rule(["delete"], [""], ["pods"]), rule(["get"], ["apps"], ["deployments"]),
               rule(["get"], [""], ["pods"], ["a"])]
    assert compact_rules(missing) == [rule(["get"], [""], ["pods"], ["a"]), rule(["get", "delete"], [""], ["pods"]),
                                      rule(["get"], ["apps"], ["deployments"])]
    assert compact_string(rule(["get", "delete"], [""], ["pods"])) == \
        '{APIGroups:[""], Resources:["pods"], Verbs:["get" "delete"]}'
    assert compact_string(rule(["get"], urls=["/healthz"])) == '{NonResourceURLs:["/healthz"], Verbs:["get"]}'


# -- rule_test.go: ConfirmNoEscalation ------------------------------------------------------------------------

def test_confirm_no_escalation_message(store):
    cluster_role(store, "reader", rule(["get", "list"], [""], ["pods"]))
    role_binding(store, "dev", "read", "ClusterRole", "reader", "User:alice")
    resolver = RuleResolver(store, plural=True)
    assert confirm_no_escalation(resolver, "alice", ["devs"], "dev", [rule(["get"], [""], ["pods"])]) is None
    message = confirm_no_escalation(resolver, "alice", ["devs", "system:authenticated"], "dev",
                                    [rule(["get", "delete", "update"], ["", "apps"], ["pods"])])
    assert message == ('user "alice" (groups=["devs" "system:authenticated"]) is attempting to grant RBAC permissions '
                       'not currently held:\n'
                       '{APIGroups:[""], Resources:["pods"], Verbs:["delete" "update"]}\n'
                       '{APIGroups:["apps"], Resources:["pods"], Verbs:["get" "delete" "update"]}')
    role_binding(store, "dev", "dangling", "Role", "gone", "User:alice")
    message = confirm_no_escalation(resolver, "alice", [], "dev", [rule(["delete"], [""], ["pods"])])
    assert message.endswith('; resolution errors: [roles.rbac.authorization.k8s.io "gone" not found]')


# -- policybased storage: escalation checks over the API ---------------------------------------------------------

@pytest.fixture
def api(store):
    api = Api(Registry(store))
    root = LocalClient(api, "root", ["system:masters", "system:authenticated"])
    root.create("v1", "namespaces", {"metadata": {"name": "dev"}})
    root.create("v1", "namespaces", {"metadata": {"name": "prod"}})
    root.create(RBAC, "clusterroles", {"metadata": {"name": "pod-reader"},
                                       "rules": [rule(["get", "list"], [""], ["pods"])]})
    root.create(RBAC, "clusterroles", {"metadata": {"name": "rbac-writer"},
                                       "rules": [rule(["create", "update", "get"], [G],
                                                      ["roles", "rolebindings", "clusterroles", "clusterrolebindings"])]})
    root.create(RBAC, "clusterrolebindings", {"metadata": {"name": "alice"}, "subjects": subjects("User:alice"),
                                              "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "rbac-writer"}})
    root.create(RBAC, "rolebindings", {"metadata": {"name": "alice-reads"}, "subjects": subjects("User:alice"),
                                       "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "pod-reader"}}, "dev")
    return api


def forbidden_message(call) -> str:
    with pytest.raises(ApiError) as exc:
        call()
    assert exc.value.code == 403, exc.value.message
    return exc.value.message


def test_roles_may_grant_only_what_the_user_holds(api):
    alice = LocalClient(api, "alice", ["system:authenticated"])
    alice.create(RBAC, "roles", {"metadata": {"name": "ok"}, "rules": [rule(["get"], [""], ["pods"])]}, "dev")
    message = forbidden_message(lambda: alice.create(RBAC, "roles", {
        "metadata": {"name": "more"}, "rules": [rule(["get", "delete"], [""], ["pods"])]}, "dev"))
    assert message == ('roles.rbac.authorization.k8s.io "more" is forbidden: user "alice" '
                       '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
                       '{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}')
    # in another namespace alice holds nothing: even the role she could make in dev is refused
    forbidden_message(lambda: alice.create(RBAC, "roles", {
        "metadata": {"name": "ok"}, "rules": [rule(["get"], [""], ["pods"])]}, "prod"))
    # an update that widens the role is checked too
    role_obj = alice.get(RBAC, "roles", "ok", "dev")
    role_obj["rules"] = [rule(["get", "watch"], [""], ["pods"])]
    assert "not currently held" in forbidden_message(lambda: alice.update(RBAC, "roles", role_obj, "dev"))


def test_escalate_verb_lifts_the_check_and_aggregation_needs_everything(api):
    root = LocalClient(api, "root", ["system:masters"])
    root.create(RBAC, "clusterroles", {"metadata": {"name": "escalator"},
                                       "rules": [rule(["escalate"], [G], ["clusterroles"])]})
    root.create(RBAC, "clusterrolebindings", {"metadata": {"name": "bob"}, "subjects": subjects("User:bob"),
                                              "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "escalator"}})
    root.create(RBAC, "clusterrolebindings", {"metadata": {"name": "bob-writes"}, "subjects": subjects("User:bob"),
                                              "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "rbac-writer"}})
    bob = LocalClient(api, "bob", ["system:authenticated"])
    bob.create(RBAC, "clusterroles", {"metadata": {"name": "everything"}, "rules": [rule(["*"], ["*"], ["*"])]})
    alice = LocalClient(api, "alice", ["system:authenticated"])
    message = forbidden_message(lambda: alice.create(RBAC, "clusterroles", {
        "metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}}))
    assert message == ('clusterroles.rbac.authorization.k8s.io "agg" is forbidden: must have cluster-admin privileges '
                       'to use the aggregationRule')


def test_bindings_need_the_rights_or_bind(api):
    alice = LocalClient(api, "alice", ["system:authenticated"])
    binding = {"metadata": {"name": "carol-reads"}, "subjects": subjects("User:carol"),
               "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "pod-reader"}}
    alice.create(RBAC, "rolebindings", binding, "dev")        # she holds pod-reader's rules in dev
    message = forbidden_message(lambda: alice.create(RBAC, "clusterrolebindings", binding))
    assert message.startswith('clusterrolebindings.rbac.authorization.k8s.io "carol-reads" is forbidden: user "alice" '
                              '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently '
                              'held:\n{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}')
    # `bind` on the role, in the binding's namespace, lifts the check
    root = LocalClient(api, "root", ["system:masters"])
    root.create(RBAC, "roles", {"metadata": {"name": "binder"}, "rules": [
        rule(["bind"], [G], ["clusterroles"], ["cluster-admin"])]}, "dev")
    root.create(RBAC, "rolebindings", {"metadata": {"name": "alice-binds"}, "subjects": subjects("User:alice"),
                                       "roleRef": {"apiGroup": G, "kind": "Role", "name": "binder"}}, "dev")
    alice.create(RBAC, "rolebindings", {"metadata": {"name": "carol-admin"}, "subjects": subjects("User:carol"),
                                        "roleRef": {"apiGroup": G, "kind": "ClusterRole", "name": "cluster-admin"}},
                 "dev")
    # a binding to a role that is not there: the registry's 404
    with pytest.raises(ApiError) as exc:
        alice.create(RBAC, "rolebindings", {"metadata": {"name": "x"}, "subjects": subjects("User:carol"),
                                            "roleRef": {"apiGroup": G, "kind": "Role", "name": "nope"}}, "dev")
    assert (exc.value.code, exc.value.message) == (404, 'roles.rbac.authorization.k8s.io "nope" not found')
    # roleRef cannot change (validation), whoever asks
    made = root.get(RBAC, "rolebindings", "carol-reads", "dev")
    made["roleRef"]["name"] = "rbac-writer"
    with pytest.raises(ApiError) as exc:
        root.update(RBAC, "rolebindings", made, "dev")
    assert exc.value.code == 422 and "cannot change roleRef" in exc.value.message


# -- clusterroleaggregation_controller_test.go TestSyncClusterRole ----------------------------------------------

def cr(name, labels=None, rules=(), selectors=None):
    obj = {"metadata": {"name": name, "labels": labels or {}}, "rules": list(rules)}
    if selectors is not None:
        obj["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return obj


HAMMER = {"matchLabels": {"hammer": "false"}}
FOO = {"matchLabels": {"foo": "bar"}}
R1, R2, R3 = rule(["get"], [""], ["pods"]), rule(["get"], [""], ["nodes"]), rule(["list"], [""], ["pods"])


@pytest.mark.parametrize("target,others,expected", [
    # no matching roles: empty
    (cr("target", selectors=[HAMMER]), [cr("other", {"foo": "bar"}, [R1])], []),
    # selected roles in name order, the role itself skipped
    (cr("target", {"foo": "bar"}, [R3], [FOO]), [cr("b", {"foo": "bar"}, [R2]), cr("a", {"foo": "bar"}, [R1])],
     [R1, R2]),
    # duplicates once, selectors in order
    (cr("target", selectors=[HAMMER, FOO]), [cr("a", {"foo": "bar"}, [R1, R2]), cr("b", {"hammer": "false"}, [R2, R3])],
     [R2, R3, R1]),
])
def test_aggregation_rules(target, others, expected):
    assert aggregate(target, [target] + others) == expected


# -- bootstrap policy ------------------------------------------------------------------------------------------

def test_bootstrap_policy_is_reconciled_and_aggregates_view_into_edit_into_admin(api):
    root = LocalClient(api, "root", ["system:masters"])
    bootstrappolicy.ensure(root)
    roles = {r["metadata"]["name"]: r for r in root.list(RBAC, "clusterroles")[0]}
    assert {"cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
            "system:public-info-viewer", "system:aggregate-to-view", "system:node",
            "system:controller:generic-garbage-collector"} <= set(roles)
    view = roles["view"]
    assert view["metadata"]["labels"] == {"kubernetes.io/bootstrapping": "rbac-defaults",
                                          "rbac.authorization.k8s.io/aggregate-to-edit": "true"}
    assert view["metadata"]["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    for name in ("view", "edit", "admin"):        # what the aggregation controller does, in that order
        roles[name]["rules"] = aggregate(roles[name], list(roles.values()))
    view_rules, edit_rules, admin_rules = (roles[n]["rules"] for n in ("view", "edit", "admin"))
    # TestEditViewRelationship: what view grants, edit grants; what edit grants, admin grants
    assert covers(edit_rules, view_rules)[0] and covers(admin_rules, edit_rules)[0]
    assert not covers(view_rules, [rule(["get"], [""], ["secrets"])])[0]
    assert not covers(edit_rules, [rule(["create"], [G], ["rolebindings"])])[0]
    # a default role that lost a rule gets it back at the next start; extra rules stay; autoupdate=false is kept
    basic = roles["system:basic-user"]
    basic["rules"] = [rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews"]),
                      rule(["get"], [""], ["namespaces"])]
    root.update(RBAC, "clusterroles", basic)
    discovery = roles["system:discovery"]
    discovery["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
    discovery["rules"] = []
    root.update(RBAC, "clusterroles", discovery)
    bootstrappolicy.ensure(root)
    basic = root.get(RBAC, "clusterroles", "system:basic-user")
    assert covers(basic["rules"], bootstrappolicy.cluster_roles()[[r["metadata"]["name"] for r in
                  bootstrappolicy.cluster_roles()].index("system:basic-user")]["rules"])[0]
    assert rule(["get"], [""], ["namespaces"]) in basic["rules"]
    assert root.get(RBAC, "clusterroles", "system:discovery").get("rules") in (None, [])
    admins = root.get(RBAC, "clusterrolebindings", "kubeadm:cluster-admins")
    assert admins["roleRef"]["name"] == "cluster-admin" and admins["subjects"][0]["name"] == "kubeadm:cluster-admins"


def test_request_attributes_name_a_namespace_and_a_field_selected_object(api):
    """RequestInfoFactory: namespaces/<name> is in namespace <name>; a list or watch with
    fieldSelector=metadata.name=<x> is about the object <x>, so resourceNames rules match it."""
    root = LocalClient(api, "root", ["system:masters"])
    root.create("v1", "configmaps", {"metadata": {"name": "a"}}, "dev")
    root.create(RBAC, "roles", {"metadata": {"name": "one"}, "rules": [
        rule(["get"], [""], ["namespaces"]), rule(["get", "list", "watch"], [""], ["configmaps"], ["a"])]}, "dev")
    root.create(RBAC, "rolebindings", {"metadata": {"name": "carol"}, "subjects": subjects("User:carol"),
                                       "roleRef": {"apiGroup": G, "kind": "Role", "name": "one"}}, "dev")
    carol = LocalClient(api, "carol", ["system:authenticated"])
    assert carol.get("v1", "namespaces", "dev")["metadata"]["name"] == "dev"
    assert forbidden_message(lambda: carol.get("v1", "namespaces", "prod")).startswith('namespaces "prod" is forbidden')
    assert [c["metadata"]["name"] for c in carol.list("v1", "configmaps", "dev", field_selector="metadata.name=a")[0]] \
        == ["a"]
    assert forbidden_message(lambda: carol.list("v1", "configmaps", "dev")) == (
        'configmaps is forbidden: User "carol" cannot list resource "configmaps" in API group "" in the namespace "dev"')
