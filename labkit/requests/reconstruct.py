"""The requests lab's reconstruction: what the embedded API server would decide, computed
in-process from objects read from it (or changed copies of them), with the server's own code.

- `Objects`: a read-only stand-in for the server's store (storage.Store's `get` and `scan`) over
  a list of objects, so that labkit's RBAC rule resolver and admission matchers run on it as
  they do in the server;
- `access`: a subject's effective permissions over the whole space — every verb × resource (and
  subresource) × namespace that exists, and the cluster scope — as kube-apiserver's authorizer
  chain decides them (labkit.apiserver.authorizer: the privileged group system:masters first,
  then RBAC's rules, plugin/pkg/auth/authorizer/rbac/rbac.go RBACAuthorizer.Authorize: allowed
  when any rule of a binding that applies allows);
- `webhook_called`: whether a webhook is sent a request (admission/webhook.py should_call, which
  follows apiserver/pkg/admission/plugin/webhook/generic/webhook.go ShouldCallHook: namespace
  and object selectors, rules, matchConditions in CEL);
- `policy_verdict`: what the ValidatingAdmissionPolicies and their bindings do to a request
  (admission/policy.py, policy/validating/dispatcher.go).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field

from labkit.apiserver import authorizer
from labkit.apiserver.rbac import (RuleResolver, api_group_matches, resource_name_matches, rule_allows,
                                  verb_matches)

RBAC_GROUP = "rbac.authorization.k8s.io"
KEYS = {  # (apiVersion, kind) -> the store's key (resources.ResourceType.storage_key)
    ("rbac.authorization.k8s.io/v1", "Role"): f"{RBAC_GROUP}/roles",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): f"{RBAC_GROUP}/clusterroles",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): f"{RBAC_GROUP}/rolebindings",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): f"{RBAC_GROUP}/clusterrolebindings",
    ("v1", "Namespace"): "/namespaces",
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"):
        "admissionregistration.k8s.io/validatingadmissionpolicies",
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"):
        "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"):
        "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    ("v1", "Service"): "/services",                                         # a webhook's Service and its
    ("discovery.k8s.io/v1", "EndpointSlice"): "discovery.k8s.io/endpointslices",    # endpoints, to call it
}
# every verb RBAC rules name (kubectl auth can-i's and the special verbs of rbac, certificates,
# impersonation and pod security policies)
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
         "bind", "escalate", "impersonate", "approve", "sign", "use")
NON_RESOURCE_PATHS = ("/api", "/apis", "/healthz", "/livez", "/readyz", "/version", "/metrics", "/logs",
                      "/openapi/v2")


class Objects:
    """storage.Store's reading side over a fixed list of objects (not changed afterwards): as the
    store does, scan gives the shared objects with their JSON text, get and list fresh copies read
    from that text. Each object's text is made once, when first asked for (the RBAC resolver scans
    every binding, and reads a role, for each subject and namespace it is asked about)."""

    def __init__(self, objects):
        self._index: dict[str, dict[tuple[str, str], dict]] = {}
        for obj in objects:
            key = KEYS.get((obj.get("apiVersion"), obj.get("kind")))
            if key is None:
                continue
            meta = obj.get("metadata") or {}
            self._index.setdefault(key, {})[(meta.get("namespace") or "", meta.get("name", ""))] = obj
        self._texts: dict[tuple[str, str, str], str] = {}
        self._scans: dict[tuple, list] = {}
        self.revision = 1

    def _text(self, key, at: tuple[str, str], obj) -> str:
        text = self._texts.get((key, *at))
        if text is None:
            text = self._texts[(key, *at)] = json.dumps(obj)
        return text

    def get(self, key, namespace, name):
        at = (namespace or "", name)
        obj = self._index.get(key, {}).get(at)
        return json.loads(self._text(key, at, obj)) if obj is not None else None

    def scan(self, key, namespace=None, after=None, at=None):
        found = self._scans.get((key, namespace))
        if found is None:       # the objects do not change: each scan is made once
            entries = sorted(self._index.get(key, {}).items())
            found = self._scans[(key, namespace)] = [
                ((ns, name), obj, self._text(key, (ns, name), obj)) for (ns, name), obj in entries
                if namespace is None or ns == namespace]
        return list(found), self.revision

    def list(self, key, namespace=None):
        entries, rev = self.scan(key, namespace)
        return [json.loads(text) for _, _, text in entries], rev


class _Catalog:
    """The registry's catalogue as the matchers use it: Pods are served in core/v1 only, so no
    other group/version is equivalent to them (matchPolicy Equivalent finds nothing)."""
    generation = 0

    def all(self):
        return []

    def for_kind(self, api_version, kind):
        return None


@dataclass
class Registry:
    store: Objects
    catalog: _Catalog = field(default_factory=_Catalog)

    def present(self, rt, obj):
        return obj

    def redecode(self, rt, obj):
        """A webhook's patched object as it stands (the Pods judged here need no defaulting)."""
        return obj


# -- RBAC over the whole space -------------------------------------------------------------------

@dataclass(frozen=True)
class Resource:
    group: str
    resource: str          # with `/subresource` for a subresource
    namespaced: bool


# The subresources of core/v1 that a v1.34 kube-apiserver serves (its discovery of /api/v1; storage
# in pkg/registry/core/rest/storage_core.go) and RBAC rules may grant, whether or not labkit's
# embedded server answers them: a grant of pods/exec is a grant even where exec is not served.
BUILTIN_SUBRESOURCES = (
    ("pods/attach", True), ("pods/binding", True), ("pods/ephemeralcontainers", True), ("pods/eviction", True),
    ("pods/exec", True), ("pods/log", True), ("pods/portforward", True), ("pods/proxy", True),
    ("pods/resize", True), ("pods/status", True), ("services/proxy", True), ("services/status", True),
    ("nodes/proxy", False), ("nodes/status", False), ("namespaces/finalize", False), ("namespaces/status", False),
    ("persistentvolumeclaims/status", True), ("persistentvolumes/status", False),
    ("replicationcontrollers/scale", True), ("replicationcontrollers/status", True),
    ("resourcequotas/status", True), ("serviceaccounts/token", True))


@dataclass
class Space:
    """What exists to be asked about: namespaces, served resources and the names RBAC rules name."""
    namespaces: list[str]
    resources: list[Resource]
    names: tuple[str, ...] = ()

    def covering(self, *object_lists) -> "Space":
        """This space, plus what RBAC could grant beyond the served resources: core/v1's built-in
        subresources, every resource a rule of `object_lists` names (a grant of a resource not
        served now is still a grant), and every name a rule lists in resourceNames (so that
        access() of different rule sets asks about the same names)."""
        found = {(r.group, r.resource): r for r in self.resources}
        for resource, namespaced in BUILTIN_SUBRESOURCES:
            found.setdefault(("", resource), Resource("", resource, namespaced))
        names = set(self.names)
        for objects in object_lists:
            for obj in objects:
                if obj.get("kind") not in ("Role", "ClusterRole"):
                    continue
                for rule in obj.get("rules") or []:
                    names.update(rule.get("resourceNames") or [])
                    for group in rule.get("apiGroups") or []:
                        for resource in rule.get("resources") or []:
                            if "*" not in group and "*" not in resource:
                                found.setdefault((group, resource), Resource(group, resource, True))
        return Space(self.namespaces, sorted(found.values(), key=lambda r: (r.group, r.resource)),
                     tuple(sorted(names)))

    @classmethod
    def from_observation(cls, data: dict) -> "Space":
        return cls(list(data["namespaces"]), [Resource(*r) for r in data["resources"]])

    def to_observation(self) -> dict:
        return {"namespaces": list(self.namespaces),
                "resources": [[r.group, r.resource, r.namespaced] for r in self.resources]}


def discover(client) -> Space:
    """The namespaces and every resource and subresource the server serves (its discovery, each
    group's preferred version)."""
    namespaces = sorted(n["metadata"]["name"] for n in client.list("v1", "namespaces")[0])
    found: dict[tuple[str, str], Resource] = {}
    paths = ["/api/v1"]
    code, body = client.request("GET", "/apis")
    if code == 200:
        for group in body.get("groups") or []:
            version = (group.get("preferredVersion") or {}).get("groupVersion")
            if version:
                paths.append(f"/apis/{version}")
    for path in paths:
        code, body = client.request("GET", path)
        if code != 200:
            continue
        group = body.get("groupVersion", "v1").rpartition("/")[0] if "/" in body.get("groupVersion", "") else ""
        for r in body.get("resources") or []:
            found.setdefault((group, r["name"]), Resource(group, r["name"], bool(r.get("namespaced"))))
    return Space(namespaces, sorted(found.values(), key=lambda r: (r.group, r.resource)))


@dataclass(frozen=True)
class Subject:
    """Who asks: a user name and groups, as the authenticator makes them."""
    user: str
    groups: tuple[str, ...]
    label: str              # how feedback names it

    @classmethod
    def of(cls, subject: dict, binding_namespace: str = "") -> "Subject":
        """A binding's subject as a request's user (authenticated users are in
        system:authenticated; a ServiceAccount also in system:serviceaccounts and
        system:serviceaccounts:<namespace>, serviceaccount.UserInfo)."""
        kind, name = subject.get("kind"), subject.get("name", "")
        if kind == "ServiceAccount":
            ns = subject.get("namespace") or binding_namespace
            return cls(f"system:serviceaccount:{ns}:{name}",
                       ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
                       f"the ServiceAccount {ns}/{name}")
        if kind == "Group":
            return cls(f"a member of {name}", (name, "system:authenticated") if name != "system:unauthenticated"
                       else (name,), f"the group {name}")
        return cls(name, ("system:authenticated",), f"the user {name}")


def rules(objects, subject: Subject, namespaces) -> tuple:
    """The rules RBAC's resolver finds for `subject` in each of `namespaces` ("" the cluster scope),
    in a canonical form: two rule sets that are equal allow the same requests."""
    store = objects if isinstance(objects, Objects) else Objects(objects)
    resolver = RuleResolver(store)
    return tuple(tuple(sorted(json.dumps(r, sort_keys=True) for r in resolver.rules_for(
        subject.user, list(subject.groups), ns)[0])) for ns in namespaces)


Grant = tuple        # (namespace, verb, group, resource, name) or ("", verb, "", path, "") for a path


def access(objects, subject: Subject, space: Space) -> frozenset:
    """Every request of the space the authorizer allows `subject` (names: "" and each name a rule
    lists in resourceNames)."""
    if isinstance(objects, Objects):
        return _access(objects, subject, space)
    # the same objects, subject and space are asked about again and again (the reference's and
    # each mutant's judgement, in which one object of many differs): the answer is kept, under a
    # digest of the objects' content
    digest = hashlib.sha256(json.dumps(objects, sort_keys=True, default=str).encode()).digest()
    return _access_of(digest, subject, tuple(space.namespaces), tuple(space.resources), tuple(space.names),
                      objects)


_ACCESS: "OrderedDict[tuple, frozenset]" = OrderedDict()      # least recently used first
_ACCESS_MAX = 256


def _access_of(digest: bytes, subject: Subject, namespaces: tuple, resources: tuple, names: tuple,
               objects) -> frozenset:
    key = (digest, subject.user, tuple(subject.groups), namespaces, resources, names)
    found = _ACCESS.get(key)
    if found is None:
        found = _ACCESS[key] = _access(Objects(objects), subject, Space(list(namespaces), list(resources), names))
        if len(_ACCESS) > _ACCESS_MAX:
            _ACCESS.popitem(last=False)
    else:
        _ACCESS.move_to_end(key)
    return found


def _access(store: "Objects", subject: Subject, space: Space) -> frozenset:
    if "system:masters" in subject.groups:
        rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "nonResourceURLs": ["*"]}]
        per_ns = {ns: rules for ns in ["", *space.namespaces]}
    else:
        resolver = RuleResolver(store)
        per_ns = {ns: resolver.rules_for(subject.user, list(subject.groups), ns)[0] for ns in ["", *space.namespaces]}
    resources, names = tuple(space.resources), tuple(space.names)
    granted = set()
    for ns, rules in per_ns.items():
        if rules:
            granted |= _granted_in(ns, json.dumps(rules, sort_keys=True), resources, names)
    return frozenset(granted)


@functools.lru_cache(maxsize=512)
def _granted_in(ns: str, rules_json: str, resources: tuple, space_names: tuple) -> frozenset:
    """What `rules` (JSON) allow in the namespace `ns` ("" the cluster scope) over the resources and
    names of a space. Who asks does not enter rule_allows; the same rules over the same space are
    asked about again and again (each mutant of an exercise changes one object of many), so the
    answer is kept."""
    rules = json.loads(rules_json)
    granted = set()
    names = sorted({"", *space_names} | {n for r in rules for n in (r.get("resourceNames") or [])})
    # rule_allows (rbac.go RuleAllows) is verb, group, resource and name matching: the rules
    # are sorted by verb and group once, the rules that match a resource too are found once
    # (with rule_allows itself, asked about a name every rule accepts), then the names
    unnamed: dict[tuple[str, str], list] = {}
    for verb in VERBS:
        for group in {r.group for r in resources}:
            unnamed[(verb, group)] = [(rule, _any_name(rule)) for rule in rules
                                      if verb_matches(rule, verb) and api_group_matches(rule, group)]
    for r in resources:
        if ns and not r.namespaced:
            continue
        resource, _, sub = r.resource.partition("/")
        for verb in VERBS:
            anyname = authorizer.Attributes("", [], verb, ns, group=r.group, resource=resource, subresource=sub)
            fitting = [rule for rule, any_name in unnamed[(verb, r.group)] if rule_allows(anyname, any_name)]
            if not fitting:
                continue
            if any(not rule.get("resourceNames") for rule in fitting):      # a rule for every name
                granted.update((ns, verb, r.group, r.resource, name) for name in names)
                continue
            for name in names:
                if any(resource_name_matches(rule, name) for rule in fitting):
                    granted.add((ns, verb, r.group, r.resource, name))
    if not ns:
        for path in NON_RESOURCE_PATHS:
            for verb in ("get", "post", "put", "delete"):
                attrs = authorizer.Attributes("", [], verb, path=path)
                if any(rule_allows(attrs, rule) for rule in rules):
                    granted.add(("", verb, "", path, ""))
    return frozenset(granted)


def _any_name(rule: dict) -> dict:
    """The rule without its resourceNames (so it accepts every name)."""
    return {k: v for k, v in rule.items() if k != "resourceNames"} if rule.get("resourceNames") else rule


def describe(grant: Grant) -> str:
    """`list pods in shop`, `get secrets named x in dev`, `delete nodes (cluster-wide)`."""
    ns, verb, group, resource, name = grant
    if resource.startswith("/"):
        return f"{verb} the path {resource}"
    what = resource + (f".{group}" if group else "")
    named = f" named {name}" if name else ""
    return f"{verb} {what}{named} " + (f"in {ns}" if ns else "cluster-wide")


def bindings_granting(objects, subject: Subject, grants) -> list[dict]:
    """The bindings through which `subject` holds any of `grants` (the rule resolver's sources)."""
    store = objects if isinstance(objects, Objects) else Objects(objects)
    resolver = RuleResolver(store)
    found = {}
    # the grants of each namespace by verb and group: a rule is asked (rule_allows) only about the
    # requests of its verbs and groups, made into request attributes when first asked about
    wanted: dict[str, dict[tuple[str, str], list]] = {}
    for g in grants:
        by_key = wanted.setdefault(g[0], {})
        if not g[3].startswith("/"):
            by_key.setdefault((g[1], g[2]), []).append(g)
    user, groups = subject.user, list(subject.groups)

    def attributes(g):
        resource, _, subresource = g[3].partition("/")
        return authorizer.Attributes(user, groups, g[1], g[0], group=g[2], resource=resource,
                                     subresource=subresource, name=g[4])

    for ns in sorted(wanted):
        by_key, made = wanted[ns], {}

        def asked(key):
            if key not in made:
                made[key] = [attributes(g) for g in by_key[key]]
            return made[key]

        def visit(source, rule, error):
            if rule is None:
                return True
            meta = source.binding["metadata"]
            binding = (source.binding.get("kind"), meta.get("namespace", ""), meta["name"])
            if binding in found:        # found through an earlier rule of the same binding
                return True
            keys = [key for key in by_key if verb_matches(rule, key[0]) and api_group_matches(rule, key[1])]
            if any(rule_allows(attrs, rule) for key in keys for attrs in asked(key)):
                found[binding] = source.binding
            return True
        resolver.visit_rules_for(user, groups, ns, visit)
    return list(found.values())


# -- admission -----------------------------------------------------------------------------------

def _pods_type():
    from labkit.apiserver.registry.catalog import builtin_types
    global _PODS
    if _PODS is None:
        _PODS = next(t for t in builtin_types() if (t.group, t.version, t.resource) == ("", "v1", "pods"))
    return _PODS


_PODS = None


def pod_attributes(namespace: str, pod: dict, operation: str = "CREATE", dry_run: bool = False):
    """admission.Attributes of a Pod creation in `namespace`."""
    from labkit.apiserver.admission import Attributes
    rt = _pods_type()
    pod = copy.deepcopy(pod)
    pod.setdefault("metadata", {})["namespace"] = namespace
    return Attributes(operation, rt, namespace, (pod.get("metadata") or {}).get("name", ""), pod, dry_run=dry_run,
                      options={"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1",
                               **({"dryRun": ["All"]} if dry_run else {})})


def other_requests(namespace: str, labels: dict | None = None):
    """admission.Attributes of every request in `namespace` that is not a Pod creation: each
    namespaced built-in kind created, updated and deleted (the Pods' own updates and deletions, and
    their status subresource, among them), a connection to a Pod (exec, attach, port-forward,
    which admission sees as CONNECT), and the Pods' binding, eviction, ephemeralcontainers and
    resize subresources. With `labels`, the objects carry them (for objectSelectors)."""
    from labkit.apiserver.admission import Attributes
    from labkit.apiserver.registry.catalog import builtin_types
    for rt in builtin_types():
        if not getattr(rt, "namespaced", True):
            continue
        obj = {"apiVersion": f"{rt.group}/{rt.version}".lstrip("/"), "kind": rt.kind,
               "metadata": {"name": "probe", "namespace": namespace, **({"labels": dict(labels)} if labels else {})}}
        is_pods = (rt.group, rt.resource) == ("", "pods")
        operations = (("UPDATE", ""), ("DELETE", ""), ("UPDATE", "status")) if is_pods else \
            (("CREATE", ""), ("UPDATE", ""), ("DELETE", ""))
        for operation, sub in operations:
            yield Attributes(operation, rt, namespace, "probe", None if operation == "DELETE" else obj,
                             old=None if operation == "CREATE" else obj, subresource=sub)
        if is_pods:
            for sub in ("exec", "attach", "portforward"):
                yield Attributes("CONNECT", rt, namespace, "probe", None, subresource=sub)
            # the Pods' other subresources that admission sees: a Binding and an Eviction created
            # (the scheduler's bind, the eviction API), ephemeral containers added and a resize
            # (pkg/registry/core/pod/storage/storage.go; UPDATE for a patch too)
            for operation, sub, group, kind in (("CREATE", "binding", "", "Binding"),
                                                ("CREATE", "eviction", "policy", "Eviction"),
                                                ("UPDATE", "ephemeralcontainers", "", "Pod"),
                                                ("UPDATE", "resize", "", "Pod")):
                sub_obj = {**obj, "apiVersion": f"{group}/v1".lstrip("/"), "kind": kind}
                yield Attributes(operation, rt, namespace, "probe", sub_obj, old=obj if operation == "UPDATE" else None,
                                 subresource=sub, kind=(group, "v1", kind))


def webhook_called(registry: Registry, configuration: str, index: int, hook: dict, attrs) -> str:
    """"called", "skipped", or "error: <message>" (a namespace that cannot be read, matchConditions
    that fail to evaluate under failurePolicy Fail: the request is refused)."""
    from labkit.apiserver.admission.webhook import should_call
    from labkit.apiserver.errors import ApiError
    try:
        return "called" if should_call(registry, configuration, index, hook, attrs) is not None else "skipped"
    except ApiError as exc:
        return f"error: {exc.message}"


def policy_verdict(registry: Registry, attrs) -> str:
    """"admitted" or "denied: <message>" by the ValidatingAdmissionPolicies of the registry."""
    from labkit.apiserver.admission.policy import ValidatingPolicies
    from labkit.apiserver.errors import ApiError
    try:
        ValidatingPolicies(registry).validate(attrs)
    except ApiError as exc:
        return f"denied: {exc.message}"
    return "admitted"
