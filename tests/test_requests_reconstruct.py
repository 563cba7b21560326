"""The requests lab's in-process reconstruction (labkit/requests/reconstruct.py), on the lab's
objects as built, without a server: a subject's effective access over the whole space with the
server's RBAC resolver, which namespaces' requests a webhook is sent (selectors and
matchConditions in CEL), and what a ValidatingAdmissionPolicy decides."""

from __future__ import annotations

import importlib.util

import pytest
from support import REPO

from labkit.apiserver.authorizer import Attributes
from labkit.requests import reconstruct


def _module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAB = _module("requests_lab", REPO / "labs" / "requests" / "lab.py")
SPACE = reconstruct.Space(["default", "dev", "kube-system", "shop"], [
    reconstruct.Resource("", "pods", True), reconstruct.Resource("", "pods/log", True),
    reconstruct.Resource("", "configmaps", True), reconstruct.Resource("", "secrets", True),
    reconstruct.Resource("", "nodes", False), reconstruct.Resource("rbac.authorization.k8s.io", "roles", True)])
JOB = reconstruct.Subject.of({"kind": "ServiceAccount", "name": "reporter", "namespace": "shop"})


def _fixed_binding(subject):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "fixed", "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [subject]}


def test_the_job_gets_exactly_the_role_through_the_fixed_binding_and_nothing_through_the_broken_one():
    built = LAB.rbac_as_built()
    before = reconstruct.access(built, JOB, SPACE)
    assert not [g for g in before if not g[3].startswith("/") and g[3] in ("pods", "configmaps", "secrets")]
    after = reconstruct.access(built + [_fixed_binding({"kind": "ServiceAccount", "name": "reporter",
                                                        "namespace": "shop"})], JOB, SPACE)
    assert after - before == {("shop", verb, "", "pods", "") for verb in ("get", "list", "watch")}
    # the broken binding's subject is the ServiceAccount of that name in default
    other = reconstruct.Subject.of({"kind": "ServiceAccount", "name": "reporter", "namespace": "default"})
    assert ("shop", "list", "", "pods", "") in reconstruct.access(built, other, SPACE)
    # a subject without a namespace in a RoleBinding means the binding's namespace
    same = reconstruct.access(built + [_fixed_binding({"kind": "ServiceAccount", "name": "reporter"})], JOB, SPACE)
    assert same == after


def test_the_aggregated_read_only_role_and_the_privileged_group():
    built = LAB.rbac_as_built()
    alice = reconstruct.Subject("alice", ("system:authenticated",), "alice")
    view = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "v", "namespace": "dev"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]}
    got = reconstruct.access(built + [view], alice, SPACE) - reconstruct.access(built, alice, SPACE)
    assert {g[3] for g in got} == {"pods", "pods/log", "configmaps"} and {g[0] for g in got} == {"dev"}
    assert {g[1] for g in got} == {"get", "list", "watch"}
    masters = reconstruct.Subject("alice", ("system:masters", "system:authenticated"), "alice")
    everything = reconstruct.access(built, masters, SPACE)
    assert ("", "delete", "", "nodes", "") in everything and ("dev", "get", "", "secrets", "") in everything


def test_a_webhook_is_sent_what_its_selectors_and_match_conditions_let_through():
    namespaces = [{"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}}
                  for n in ("kube-system", "policy", "shop")]
    registry = reconstruct.Registry(reconstruct.Objects(namespaces))
    hook = {"name": "h.example.com", "failurePolicy": "Fail", "sideEffects": "None",
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "matchConditions": [{"name": "not-system",
                                 "expression": "!(request.namespace in ['kube-system', 'policy'])"}]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    sent = {ns: reconstruct.webhook_called(registry, "c", 0, hook, reconstruct.pod_attributes(ns, pod))
            for ns in ("kube-system", "policy", "shop")}
    assert sent == {"kube-system": "skipped", "policy": "skipped", "shop": "called"}
    hook["matchConditions"] = []
    hook["namespaceSelector"] = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                       "values": ["shop"]}]}
    assert reconstruct.webhook_called(registry, "c", 0, hook, reconstruct.pod_attributes("policy", pod)) == "skipped"
    assert reconstruct.webhook_called(registry, "c", 0, hook, reconstruct.pod_attributes("shop", pod)) == "called"


def test_the_reference_image_policy_refuses_untagged_images_in_web_only():
    solution = _module("requests_policy", REPO / "labs" / "requests" / "solutions" / "image-tag-policy.py")
    namespaces = [{"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": n, "labels": {"kubernetes.io/metadata.name": n}}} for n in ("web", "default")]
    registry = reconstruct.Registry(reconstruct.Objects(
        [solution.policy(solution.EXPRESSIONS), solution.binding()] + namespaces))

    def verdict(ns, image):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": image}]}}
        return reconstruct.policy_verdict(registry, reconstruct.pod_attributes(ns, pod)).split(":")[0]
    assert [verdict("web", i) for i in ("nginx", "nginx:1.27", "registry.example.com:5000/app",
                                        "app@sha256:" + "a" * 64)] == ["denied", "admitted", "denied", "admitted"]
    assert verdict("default", "nginx") == "admitted"


POLICY_SOLUTION = _module("requests_policy", REPO / "labs" / "requests" / "solutions" / "image-tag-policy.py")


def _typed(obj):
    return {**obj, "apiVersion": "admissionregistration.k8s.io/v1"}


@pytest.fixture
def image_policy():
    """The image-tag-policy exercise's check context (labkit state isolated by the test setup), its
    checks module, and a judge of an observation: None when it passes, else the failure's message."""
    from labkit.exercises import CheckContext, CheckFailed
    from labkit.labs import get_lab
    from labkit.state import LabEnv, LabState

    the_lab = get_lab("requests")
    state = LabState(the_lab.id)
    state.ensure_dir()
    ctx = CheckContext(LabEnv(the_lab, state), the_lab.exercise("image-tag-policy"))
    checks = the_lab._load("checks.py")

    def judge(policy, *bindings, namespaces=("web", "default", "shop")):
        obs = {"policies": [_typed(policy)], "bindings": [_typed(b) for b in bindings or (POLICY_SOLUTION.binding(),)],
               "namespaces": [{"name": n, "labels": {"kubernetes.io/metadata.name": n}} for n in namespaces]}
        try:
            result = checks.judge_image_tag_policy(ctx, obs)
        except CheckFailed as exc:
            return exc.message
        assert result.passed
        return None
    return judge


def test_an_extra_binding_that_only_audits_other_namespaces_fails_the_image_policy_and_is_named(image_policy):
    """The image policy is web's only: a second binding of the right policy for every namespace
    refuses and warns nothing with validationActions [Audit], yet writes every other namespace's
    untagged Pods into the audit log; the judge names that binding. The reference alone passes."""
    reference = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)
    assert image_policy(reference) is None
    audit = POLICY_SOLUTION.binding(("Audit",))
    audit["metadata"]["name"] = "audit-everywhere"
    del audit["spec"]["matchResources"]
    message = image_policy(reference, POLICY_SOLUTION.binding(), audit)
    assert message is not None, "an Audit binding for every namespace passed"
    assert "'audit-everywhere'" in message and "audit log" in message and "web only" in message, message


def test_an_image_policy_for_creations_only_fails_on_an_image_changed_in_place(image_policy):
    """A Pod's container image is mutable: a policy matching CREATE only admits `kubectl set image`
    to an untagged image in web, and the judge says so; with UPDATE too it passes."""
    policy = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)
    policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["CREATE"]
    message = image_policy(policy, namespaces=("web", "default"))
    assert message is not None, "a policy for creations only passed"
    assert "changed in place" in message and "UPDATE" in message, message
    policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["CREATE", "UPDATE"]
    assert image_policy(policy, namespaces=("web", "default")) is None


def test_an_image_policy_that_kubectl_debug_gets_around_fails(image_policy):
    """`kubectl debug` adds an ephemeral container through pods/ephemeralcontainers (an UPDATE whose
    object is the whole Pod): a policy matching `pods` only is never asked, one that is asked but
    judges containers and init containers only lets an untagged debug image in; the judge tells the
    two apart."""
    unasked = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS, resources=("pods",))
    message = image_policy(unasked)
    assert message is not None and "ephemeralcontainers subresource" in message and "matchConstraints" in message, \
        message
    unjudged = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS[:2])
    message = image_policy(unjudged)
    assert message is not None and "spec.ephemeralContainers" in message and "kubectl debug" in message, message


def test_an_image_policy_over_every_pod_subresource_refuses_the_scheduler(image_policy):
    """`pods/*` catches `kubectl debug` but also judges a Binding (pods/binding) and an Eviction,
    whose object has no spec.containers: under failurePolicy Fail they are refused."""
    message = image_policy(POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS, resources=("pods", "pods/*")))
    assert message is not None and message.startswith("your policy refuses the scheduler's binding"), message


def test_an_image_policy_that_judges_every_update_refuses_relabelling_an_older_pod(image_policy):
    """A Pod made in web before the policy runs an untagged image; changing its labels (`kubectl
    label`, a controller adopting it) brings no new image and must go through. A policy that judges
    every image on every update refuses it, and the judge says where to look; the reference, which
    lets an image the container already had pass on an update, passes."""
    pinned = POLICY_SOLUTION.PINNED
    every_update = POLICY_SOLUTION.policy([
        f"object.spec.containers.all(c, {pinned})",
        f"!has(object.spec.initContainers) || object.spec.initContainers.all(c, {pinned})",
        f"!has(object.spec.ephemeralContainers) || object.spec.ephemeralContainers.all(c, {pinned})"])
    message = image_policy(every_update)
    assert message is not None, "a policy that refuses relabelling an older untagged Pod passed"
    assert message.startswith("your policy refuses a change of the labels of a Pod whose untagged images") and \
        "an image the Pod already had is not new" in message, message
    assert image_policy(POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)) is None


def test_access_grants_exactly_what_rule_allows_grants_name_by_name():
    """access() finds the rules fitting a verb and resource once, then matches names: the same
    grants as asking the server's rule_allows about every request of the space, one by one."""
    from labkit.apiserver.rbac import RuleResolver, rule_allows
    built = LAB.rbac_as_built()
    named = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "n", "namespace": "shop"},
             "rules": [{"verbs": ["get", "update"], "apiGroups": [""], "resources": ["configmaps", "pods/log"],
                        "resourceNames": ["cfg", "web"]},
                       {"verbs": ["*"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["token"]}]}
    bound = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "n", "namespace": "shop"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "n"},
             "subjects": [{"kind": "ServiceAccount", "name": "reporter", "namespace": "shop"}]}
    objects = built + [named, bound, _fixed_binding({"kind": "ServiceAccount", "name": "reporter"})]
    space = reconstruct.Space(SPACE.namespaces, SPACE.resources, ("cfg", "other"))
    resolver = RuleResolver(reconstruct.Objects(objects))
    expected = set()
    for ns in ["", *space.namespaces]:
        rules = resolver.rules_for(JOB.user, list(JOB.groups), ns)[0]
        names = {"", *space.names} | {n for r in rules for n in (r.get("resourceNames") or [])}
        for r in space.resources:
            if ns and not r.namespaced:
                continue
            resource, _, sub = r.resource.partition("/")
            for verb in reconstruct.VERBS:
                for name in names:
                    attrs = Attributes(JOB.user, list(JOB.groups), verb, ns, group=r.group, resource=resource,
                                       subresource=sub, name=name)
                    if any(rule_allows(attrs, rule) for rule in rules):
                        expected.add((ns, verb, r.group, r.resource, name))
    got = {g for g in reconstruct.access(objects, JOB, space) if not g[3].startswith("/")}
    assert ("shop", "update", "", "configmaps", "web") in got and ("shop", "delete", "", "secrets", "token") in got
    assert ("shop", "update", "", "configmaps", "other") not in got
    assert got == expected


def test_bindings_granting_names_exactly_the_bindings_whose_rules_allow_a_grant():
    """bindings_granting asks each rule only about the grants of its verbs and groups, and a binding
    once: the same bindings, in the same order, as asking rule_allows about every grant for every
    rule the resolver visits."""
    from labkit.apiserver.rbac import RuleResolver, rule_allows
    built = LAB.rbac_as_built()
    extra = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "n", "namespace": "shop"},
         "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"]},
                   {"verbs": ["*"], "apiGroups": ["*"], "resources": ["secrets"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "n", "namespace": "shop"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "n"},
         "subjects": [{"kind": "ServiceAccount", "name": "reporter", "namespace": "shop"},
                      {"kind": "Group", "name": "devs"}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "e"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
         "subjects": [{"kind": "Group", "name": "devs"}]},
        _fixed_binding({"kind": "ServiceAccount", "name": "reporter"})]
    objects = built + extra
    space = reconstruct.Space(SPACE.namespaces, SPACE.resources, ("cfg", "other"))
    devs = reconstruct.Subject("dora", ("devs", "system:authenticated"), "dora")
    compared = 0
    for subject in (JOB, devs, reconstruct.Subject("nobody", ("system:authenticated",), "nobody")):
        held = sorted(reconstruct.access(objects, subject, space))
        asked = [held, [g for g in held if g[1] == "get"], [g for g in held if g[4]],
                 [("shop", "delete", "", "secrets", ""), ("dev", "list", "apps", "deployments", "")]]
        for grants in asked:
            resolver, expected = RuleResolver(reconstruct.Objects(objects)), {}
            for ns in sorted({g[0] for g in grants}):
                attrs = [Attributes(subject.user, list(subject.groups), g[1], ns, group=g[2],
                                    resource=g[3].partition("/")[0], subresource=g[3].partition("/")[2], name=g[4])
                         for g in grants if g[0] == ns and not g[3].startswith("/")]

                def visit(source, rule, error):
                    if rule is not None and any(rule_allows(a, rule) for a in attrs):
                        meta = source.binding["metadata"]
                        expected[(source.binding["kind"], meta.get("namespace", ""), meta["name"])] = source.binding
                    return True
                resolver.visit_rules_for(subject.user, list(subject.groups), ns, visit)
            got = reconstruct.bindings_granting(objects, subject, grants)
            assert got == list(expected.values()), (subject.label, len(grants))
            compared += bool(got)
    assert compared >= 6        # most of the cases name a binding at all


def test_an_image_policy_admitting_what_it_cannot_evaluate_is_told_so_not_about_ports(image_policy):
    """An expression that reads spec.initContainers without has() fails to evaluate on a Pod
    without init containers, and failurePolicy Ignore admits that Pod whatever its images: the
    judge says so, and does not blame a registry's port (the image test is right). A policy whose
    image test takes a port's colon for a tag is still told about ports."""
    pinned, kept = POLICY_SOLUTION.PINNED, POLICY_SOLUTION.kept
    policy = POLICY_SOLUTION.policy([f"(object.spec.containers + object.spec.initContainers).all(c, {pinned} || "
                                     f"{kept('containers')} || {kept('initContainers')})"])
    policy["spec"]["failurePolicy"] = "Ignore"
    message = image_policy(policy)
    assert message is not None, "a policy that admits what it cannot evaluate passed"
    assert "failed to evaluate" in message and "failurePolicy Ignore" in message, message
    assert "port" not in message, message
    colon = POLICY_SOLUTION.policy(["object.spec.containers.all(c, c.image.contains(':'))",
                                    "!has(object.spec.initContainers) || "
                                    "object.spec.initContainers.all(c, c.image.contains(':'))"])
    message = image_policy(colon)
    assert message is not None and "registry's port" in message, message


def test_an_image_policy_must_hold_whoever_creates_the_pod(image_policy):
    """The check's corpus is asked as the admin; a policy whose matchConditions judge the admin's
    requests only lets a Deployment's Pods (the ReplicaSet controller's requests), a
    ServiceAccount's or another person's in with untagged images, and one bound everywhere that
    judges everyone but the admin outside web refuses other namespaces' Pods: both fail, and say
    why."""
    policy = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)
    policy["spec"]["matchConditions"] = [{"name": "the-admin",
                                          "expression": "request.userInfo.username == 'labkit-admin'"}]
    message = image_policy(policy)
    assert message is not None, "a policy for the admin's requests only passed"
    assert "whoever creates the Pod" in message and "matchConditions" in message, message
    others = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)
    others["spec"]["matchConditions"] = [{"name": "web-or-not-the-admin",
                                          "expression": "request.namespace == 'web' || "
                                                        "request.userInfo.username != 'labkit-admin'"}]
    everywhere = POLICY_SOLUTION.binding()
    del everywhere["spec"]["matchResources"]
    message = image_policy(others, everywhere)
    assert message is not None, "a policy bound everywhere for everyone but the admin passed"
    assert "refused" in message and "web only" in message, message
    assert image_policy(POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)) is None


def test_an_image_policy_must_judge_everyones_updates(image_policy):
    """A policy that judges creations from everyone but updates (`kubectl set image`, `kubectl
    debug`) only from the admin lets another user give a running Pod an untagged image: it fails."""
    policy = POLICY_SOLUTION.policy(POLICY_SOLUTION.EXPRESSIONS)
    policy["spec"]["matchConditions"] = [{"name": "creations-or-the-admin",
                                          "expression": "request.operation == 'CREATE' || "
                                                        "request.userInfo.username == 'labkit-admin'"}]
    message = image_policy(policy)
    assert message is not None, "a policy judging only the admin's updates passed"
    assert "whoever sends the request" in message and "matchConditions" in message, message


def test_a_role_changed_from_the_one_the_cluster_built_is_named_with_what_folds_into_it():
    """alice's feedback names a bound ClusterRole whose rules are not those the lab built, and the
    ClusterRole of the student's own that the aggregation controller folds into it (a view that reads
    Secrets was fed back as if view left them out); a role as built is not named."""
    from labkit.labs import get_lab

    the_lab = get_lab("requests")
    checks, lab = the_lab._load("checks.py"), the_lab.environment_module()
    built = lab.rbac_as_built()
    binding = {"kind": "RoleBinding", "metadata": {"name": "alice-view", "namespace": "dev"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]}
    assert checks._roles_changed_note(built, built, [binding]) == ""
    secrets = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
    folded = {"kind": "ClusterRole", "rules": [secrets], "metadata": {
        "name": "view-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}
    live = [dict(o, rules=list(o.get("rules") or []) + [secrets])
            if o.get("kind") == "ClusterRole" and o["metadata"]["name"] == "view" else o for o in built] + [folded]
    note = checks._roles_changed_note(live, built, [binding])
    assert "the ClusterRole view is not as the cluster has it: the ClusterRole view-secrets, labelled " \
           "rbac.authorization.k8s.io/aggregate-to-view=true, adds its rules to it" in note, note
    edited = [o for o in live if o is not folded]
    assert "the ClusterRole view is not as the cluster has it: its rules were changed" in \
        checks._roles_changed_note(edited, built, [binding])
