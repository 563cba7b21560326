"""The requests lab's environment: labkit's embedded API server and, on it,

  dev, prod    ConfigMaps and a Secret each: alice gets read-only access to dev        (alice)
  shop         the ServiceAccount reporter, the Role pod-reader and a RoleBinding that
               misses the ServiceAccount (its subject names another namespace)           (forbidden)
  web          labelled pod-labeler=enabled: the student's mutating webhook and CEL
               policy apply here                                              (mutating-webhook,
                                                                               image-tag-policy)
  policy       the backend of the validating webhook pod-policy: a real HTTPS process
               (policy_backend.py) as the process of the Pod of the Deployment pod-policy
               (host network), behind the Service pod-policy; the ValidatingWebhookConfiguration
               pod-policy (failurePolicy Fail, every namespace) and the
               MutatingWebhookConfiguration pod-defaults (failurePolicy Ignore) call it    (outage)
  shop, dev    the ConfigMap prices, changed and deleted by people of the team: who deleted
               shop/prices is drawn at random at every build                               (audit)

The people are static-token users of the server's token file (kube-apiserver --token-auth-file
format), in the group shop-team, which has the ClusterRole edit in shop and dev.
The webhook CA (webhook-pki/) signs pod-policy's serving certificate and the students' (labkit
requests webhook); it and the webhook state are in the ledger, so `labkit cleanup requests`
removes them, and the students' webhook processes with them.
"""

import base64
import datetime
import json
import os
import random
import secrets
import sys
import time
from pathlib import Path

import yaml

from labkit import procs
from labkit.apiserver.client import HttpClient
from labkit.apiserver.errors import ApiError
from labkit.apiserver.registry import podconnect
from labkit.apiserver.process import ADMIN_GROUP, ADMIN_USER, read_server_info, server_alive, spawn
from labkit.apiserver.target import SERVER_TAG, for_env
from labkit.controllers.node import HOST_IP
from labkit.errors import LabkitError
from labkit.requests import pki, webhook

PEOPLE = ("bob", "carol", "dave", "erin")
TEAM_GROUP = "shop-team"
SCENE_DIR = "scene"      # the lab's own files: the backend's port, when the audit scene was set
AUDIT_FILE = "scene/audit.json"
BACKEND_TAG = "pod-policy"
BACKEND_PORT_FILE = "scene/pod-policy.port"
POLICY_NS, POLICY_NAME = "policy", "pod-policy"
WEBHOOK_NS = "web"        # labelled pod-labeler=enabled: where the mutating-webhook exercise's webhook acts
DEFAULTS_NAME = "pod-defaults"
LAB_WEBHOOKS = {("validatingwebhookconfigurations", POLICY_NAME), ("mutatingwebhookconfigurations", DEFAULTS_NAME)}
ADMISSION = "admissionregistration.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"

ROLE = {"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "shop"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}
# the bug of exercise forbidden: copied from a binding in default, the subject's namespace stayed
BINDING = {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "reporter-reads-pods", "namespace": "shop"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
           "subjects": [{"kind": "ServiceAccount", "name": "reporter", "namespace": "default"}]}


def _cm(name, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


NAMESPACES = {
    "dev": {"labels": {}, "content": [("configmaps", _cm("settings", {"log-level": "debug"})),
                                      ("secrets", {"apiVersion": "v1", "kind": "Secret",
                                                   "metadata": {"name": "db-password"},
                                                   "stringData": {"password": "dev-only"}})]},
    "prod": {"labels": {}, "content": [("configmaps", _cm("settings", {"log-level": "warn"})),
                                       ("secrets", {"apiVersion": "v1", "kind": "Secret",
                                                    "metadata": {"name": "db-password"},
                                                    "stringData": {"password": "s3cr3t"}})]},
    "shop": {"labels": {}, "content": [("serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                            "metadata": {"name": "reporter"}})]},
    "web": {"labels": {"pod-labeler": "enabled"}, "content": []},
    POLICY_NS: {"labels": {}, "content": []},
}


def server_dir(env) -> Path:
    return Path(env.dir) / SERVER_TAG


def target(env):
    return for_env(env, "requests")


def client(env) -> HttpClient:
    return target(env).client()


def up(env):
    state = server_dir(env)
    env.ledger.record("path", path=str(state))
    for name in (webhook.PKI_DIR, webhook.STATE_DIR, SCENE_DIR):
        env.ledger.record("path", path=str(Path(env.dir) / name))
    (Path(env.dir) / SCENE_DIR).mkdir(mode=0o700, exist_ok=True)
    _token_file(state)
    _policy_backend(env)            # its certificate and process while the API server starts
    spawn(env, SERVER_TAG)
    c = client(env)
    # the backend's Deployment first: its Pod becomes ready while the rest is made
    _namespace(c, POLICY_NS)
    _backend_objects(env, c)
    for ns, spec in NAMESPACES.items():
        if ns != POLICY_NS:
            _namespace(c, ns)
    for ns, spec in NAMESPACES.items():
        for resource, obj in spec["content"]:
            c.create("v1", resource, obj, ns)
    for ns in ("shop", "dev"):
        c.create(RBAC, "rolebindings", team_binding(ns), ns)
    _forbidden_scene(c)
    _audit_scene(env, c)
    _policy_webhooks(env, c)
    env.log("namespaces " + ", ".join(NAMESPACES) + " made; pod-policy webhook served; audit trail written")


def _namespace(c, name: str) -> None:
    c.create("v1", "namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": name, "labels": NAMESPACES[name]["labels"]}})


def _token_file(state: Path) -> None:
    """The server's static token file, with the lab admin and the team's people."""
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = state / "tokens.csv"
    if path.exists():
        return
    lines = [f'{secrets.token_urlsafe(32)},{ADMIN_USER},{ADMIN_USER},"{ADMIN_GROUP}"']
    lines += [f'{secrets.token_urlsafe(32)},{p},{p}-uid,"{TEAM_GROUP}"' for p in PEOPLE]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    with open(fd, "w") as f:
        f.write("\n".join(lines) + "\n")


def person_client(env, name: str, admin: HttpClient | None = None) -> HttpClient:
    """A client that authenticates as `name` with their static token (the team's people)."""
    info = read_server_info(server_dir(env))
    admin = admin or HttpClient.for_embedded(info.kubeconfig)
    for line in (server_dir(env) / "tokens.csv").read_text().splitlines():
        parts = line.split(",")
        if len(parts) > 1 and parts[1] == name:
            return HttpClient(info.url, parts[0], admin.ssl_context, user_agent="kubectl/v1.34.1 (linux/amd64)")
    raise LabkitError(f"no token for {name}")


# -- the RBAC objects as the lab builds them ---------------------------------------------------

def team_binding(namespace: str) -> dict:
    return {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "shop-team-edit", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": TEAM_GROUP}]}


def rbac_as_built() -> list[dict]:
    """Every Role, ClusterRole and binding of the lab as it is built: the server's bootstrap policy
    (reconciled at every start, labkit.apiserver.bootstrappolicy), kubeadm's admin binding, the
    team's bindings and the Role and RoleBinding of exercise forbidden."""
    from labkit.apiserver import bootstrappolicy
    from labkit.controllers.clusterroleaggregation import aggregate
    roles = bootstrappolicy.cluster_roles()
    for _ in range(len(roles)):       # the aggregation controller's syncs, until nothing changes
        changed = False
        for role in roles:
            if role.get("aggregationRule") is not None:
                rules = aggregate(role, roles)
                if rules != role.get("rules"):
                    role["rules"], changed = rules, True
        if not changed:
            break
    objects = roles + bootstrappolicy.cluster_role_bindings()
    objects.append(bootstrappolicy.admin_binding())
    objects += [team_binding(ns) for ns in ("shop", "dev")]
    objects += [json.loads(json.dumps(ROLE)), json.loads(json.dumps(BINDING))]
    return objects


def rbac_objects(c) -> list[dict]:
    """Every Role, ClusterRole and binding the server holds now."""
    out = []
    for kind, resource in (("Role", "roles"), ("ClusterRole", "clusterroles"), ("RoleBinding", "rolebindings"),
                           ("ClusterRoleBinding", "clusterrolebindings")):
        for obj in c.list(RBAC, resource)[0]:
            out.append({**obj, "apiVersion": RBAC, "kind": kind})
    return out


# -- forbidden ----------------------------------------------------------------------------------

def _forbidden_scene(c) -> None:
    c.create(RBAC, "roles", ROLE, "shop")
    c.create(RBAC, "rolebindings", BINDING, "shop")


# -- outage: the pod-policy webhook and its backend --------------------------------------------

def _policy_backend(env) -> None:
    directory = webhook.pki_dir(env)
    cert, key = pki.issue_serving(directory, POLICY_NAME, pki.sans_for(POLICY_NAME, POLICY_NS, (HOST_IP,)))
    port_file = Path(env.dir) / BACKEND_PORT_FILE
    port_file.unlink(missing_ok=True)
    procs.spawn(env, BACKEND_TAG, [sys.executable, str(Path(__file__).with_name("policy_backend.py")),
                                   "--address", HOST_IP, "--cert", str(cert), "--key", str(key),
                                   "--port-file", str(port_file)])


def _backend_port(env) -> int:
    port_file = Path(env.dir) / BACKEND_PORT_FILE
    _wait(port_file.exists, "the pod-policy backend to listen")
    return int(port_file.read_text())


BACKEND_SELECTOR = {"app": POLICY_NAME}


def _backend_objects(env, c) -> None:
    port = _backend_port(env)
    labels = dict(BACKEND_SELECTOR)
    # `kubectl logs` of the backend's Pod: the API server's answer points at the process' output
    podconnect.register_container_log(Path(env.dir) / SERVER_TAG, POLICY_NS, labels, "webhook",
                                      Path(env.dir) / "logs" / f"{BACKEND_TAG}.log")
    c.create("apps/v1", "deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": POLICY_NAME, "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1, "containers": [{
                                  "name": "webhook", "image": "registry.example.com/pod-policy:2.1",
                                  "args": [f"--port={port}"],
                                  "ports": [{"name": "https", "containerPort": port, "protocol": "TCP"}]}]}}}},
             POLICY_NS)
    c.create("v1", "services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": POLICY_NAME},
                                "spec": {"selector": labels,
                                         "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}}, POLICY_NS)


def backend_ready(c) -> bool:
    slices = c.list("discovery.k8s.io/v1", "endpointslices", POLICY_NS, label_selector=f"kubernetes.io/service-name={POLICY_NAME}")[0]
    return any((e.get("conditions") or {}).get("ready") for s in slices for e in s.get("endpoints") or [])


def webhook_configurations(env) -> list[dict]:
    ca = pki.ca_bundle(webhook.pki_dir(env))
    service = {"namespace": POLICY_NS, "name": POLICY_NAME, "port": 443}
    rule = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
    return [
        ("validatingwebhookconfigurations", {
            "apiVersion": ADMISSION, "kind": "ValidatingWebhookConfiguration", "metadata": {"name": POLICY_NAME},
            "webhooks": [{"name": "pod-policy.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "timeoutSeconds": 5, "rules": [rule],
                          "clientConfig": {"service": {**service, "path": "/validate"}, "caBundle": ca}}]}),
        ("mutatingwebhookconfigurations", {
            "apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration", "metadata": {"name": DEFAULTS_NAME},
            "webhooks": [{"name": "pod-defaults.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Ignore", "timeoutSeconds": 5, "rules": [rule],
                          "clientConfig": {"service": {**service, "path": "/mutate"}, "caBundle": ca}}]}),
    ]


def _policy_webhooks(env, c) -> None:
    """The webhooks once the backend is ready (its own Pod must be admitted before they exist)."""
    _wait(lambda: backend_ready(c), "the pod-policy Service to have a ready endpoint")
    for resource, obj in webhook_configurations(env):
        c.create(ADMISSION, resource, obj)


# -- audit ------------------------------------------------------------------------------------

def _audit_scene(env, c) -> None:
    """The ConfigMap prices in shop: made by the admin, read and changed by people of the team, and
    deleted by one of them; a ConfigMap prices in dev deleted by another. Who does what is drawn
    anew at every build: the check reads the answer from the audit log."""
    reader, changer, deleter, other = random.sample(PEOPLE, 4)
    # the team's rights come from the ClusterRole edit, whose rules the clusterrole-aggregation
    # controller gathers (clusterroleaggregation_controller.go syncClusterRole) from the roles
    # labelled aggregate-to-edit once the server listens. One of them, view, is aggregated itself
    # (from aggregate-to-view): synced before view, edit holds system:aggregate-to-edit's writes
    # without view's reads until view's update brings them. So wait until the authorizer allows
    # each person what the scene has them do (a SubjectAccessReview, as a client of a real cluster
    # would ask)
    _wait(lambda: all(_team_allowed(c, person, verb, ns) for person in PEOPLE
                      for verb, ns in (("get", "shop"), ("patch", "shop"), ("delete", "shop"), ("delete", "dev"))),
          "the clusterrole-aggregation controller to give the ClusterRole edit its rules", timeout=30.0)
    started = time.time()
    for ns in ("shop", "dev"):
        if c.get_or_none("v1", "configmaps", "prices", ns) is None:
            c.create("v1", "configmaps", _cm("prices", {"apple": "0.50", "pear": "0.70"}), ns)
    person_client(env, reader, c).get("v1", "configmaps", "prices", "shop")
    person_client(env, changer, c).patch("v1", "configmaps", "prices", {"data": {"pear": "0.75"}}, "merge", "shop")
    person_client(env, other, c).delete("v1", "configmaps", "prices", "dev")
    person_client(env, deleter, c).delete("v1", "configmaps", "prices", "shop")
    story = {"reader": reader, "changer": changer, "deleter": deleter, "dev_deleter": other}
    (Path(env.dir) / AUDIT_FILE).write_text(json.dumps({"started": started, "story": story}) + "\n")


def _team_allowed(c, person: str, verb: str, namespace: str) -> bool:
    """Whether the authorizer allows a person of the team `verb` on configmaps in `namespace`."""
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": person, "groups": [TEAM_GROUP, "system:authenticated"],
                       "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": "configmaps"}}}
    answer = c.create("authorization.k8s.io/v1", "subjectaccessreviews", review)
    return bool((answer.get("status") or {}).get("allowed"))


def audit_story(env) -> dict:
    """Who the lab had read, change and delete the ConfigMaps when it last set the scene."""
    try:
        return dict(json.loads((Path(env.dir) / AUDIT_FILE).read_text())["story"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return {}


def audit_scene_start(env) -> float:
    """When the lab last set the scene of exercise audit (seconds since the epoch)."""
    try:
        return float(json.loads((Path(env.dir) / AUDIT_FILE).read_text())["started"])
    except (FileNotFoundError, ValueError, KeyError):
        return 0.0


# -- resets -----------------------------------------------------------------------------------

EXERCISES = ("alice", "forbidden", "mutating-webhook", "image-tag-policy", "outage", "audit")
SAVED_DIR = "saved"       # the student's objects a reset removed or restored, as YAML


def _alice_subject(s, namespace: str = "") -> bool:
    """A subject of exercise alice's: her user, or a group named after her (a kind mistaken)."""
    return s.get("kind") in ("User", "Group") and s.get("name") == "alice"


def _reporter_subject(s, namespace: str = "") -> bool:
    """A subject of exercise forbidden's: the job's ServiceAccount under any of its names, and every
    ServiceAccount of shop (the job's neighbours there)."""
    return (s.get("kind") == "ServiceAccount" and (s.get("name") == "reporter" or
                                                   (s.get("namespace") or namespace) == "shop")) \
        or s.get("name") in ("reporter", "system:serviceaccount:shop:reporter")


FORBIDDEN_LAB_MADE = {("shop", BINDING["metadata"]["name"]), ("shop", "shop-team-edit")}


def exercise_binding(binding: dict, exercise_id: str) -> bool:
    """Whether a binding (an object read from the server) is the student's work on exercise alice or
    forbidden: what a reset of that exercise reverts, and what the other exercise's check leaves to it."""
    meta = binding.get("metadata") or {}
    ns = meta.get("namespace") or ""
    if exercise_id == "alice":
        return any(_alice_subject(s, ns) for s in binding.get("subjects") or [])
    if (ns, meta.get("name")) in FORBIDDEN_LAB_MADE:
        return False
    return (binding.get("kind") == "RoleBinding" and ns == "shop") or \
        any(_reporter_subject(s, ns) for s in binding.get("subjects") or [])


def _bindings_of(c, subject_matches, keep=frozenset()) -> list[tuple[str, dict]]:
    out = []
    for resource in ("rolebindings", "clusterrolebindings"):
        for item in c.list(RBAC, resource)[0]:
            meta = item["metadata"]
            if (meta.get("namespace"), meta["name"]) not in keep and \
                    any(subject_matches(s, meta.get("namespace") or "") for s in item.get("subjects") or []):
                kind = "RoleBinding" if resource == "rolebindings" else "ClusterRoleBinding"
                out.append((resource, {**item, "apiVersion": RBAC, "kind": kind}))
    return out


def _forbidden_bindings(c) -> list[tuple[str, dict]]:
    """The student's bindings of exercise forbidden: every one that names the ServiceAccount or
    another ServiceAccount of shop, and every RoleBinding in shop the lab did not make."""
    lab_made = FORBIDDEN_LAB_MADE
    found = {(r, b["metadata"].get("namespace"), b["metadata"]["name"]): (r, b)
             for r, b in _bindings_of(c, _reporter_subject, lab_made)}
    for b in c.list(RBAC, "rolebindings", "shop")[0]:
        if ("shop", b["metadata"]["name"]) not in lab_made:
            found[("rolebindings", "shop", b["metadata"]["name"])] = \
                ("rolebindings", {**b, "apiVersion": RBAC, "kind": "RoleBinding"})
    return list(found.values())


def _same(live: dict | None, built: dict, fields) -> bool:
    return live is not None and all(live.get(f) == built.get(f) for f in fields)


def _hooks_as_built(env, c) -> list[tuple[str, dict, dict | None]]:
    """(resource, as built, as it is now) of the lab's webhook configurations."""
    from importlib import util
    checks = util.spec_from_file_location("requests_checks", Path(__file__).with_name("checks.py"))
    module = util.module_from_spec(checks)
    checks.loader.exec_module(module)
    out = []
    for resource, built in webhook_configurations(env):
        live = c.get_or_none(ADMISSION, resource, built["metadata"]["name"])
        mutating = resource.startswith("mutating")
        same = live is not None and [module._normal_hook(h, mutating) for h in live.get("webhooks") or []] == \
            [module._normal_hook(h, mutating) for h in built["webhooks"]]
        out.append((resource, built, None if same else live))
    return out


def _lab_mutating_changed(env, c) -> list[tuple[str, dict, dict | None]]:
    """(resource, as built, as it is now or None if deleted) of the lab's mutating webhook
    configurations (pod-defaults) that are not as built: the mutating-webhook exercise's to keep."""
    return [(resource, built, live) for resource, built, live in _hooks_as_built(env, c)
            if resource.startswith("mutating")
            and (live is not None or c.get_or_none(ADMISSION, resource, built["metadata"]["name"]) is None)]


USER_ROLES = ("view", "edit", "admin")


def _rule_set(rules) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rules or [])


def _folded_into_user_roles(c) -> list[tuple[dict, str]]:
    """(ClusterRole, the role it changes) for each ClusterRole the cluster did not build whose label
    rbac.authorization.k8s.io/aggregate-to-<view|edit|admin>=true makes the clusterrole-aggregation
    controller fold its rules into that role (pkg/controller/clusterroleaggregation), for everyone
    bound to it: alice's read-only role is view."""
    from labkit.apiserver import bootstrappolicy
    ours = {r["metadata"]["name"] for r in bootstrappolicy.cluster_roles()}
    out = []
    for role in c.list(RBAC, "clusterroles")[0]:
        if role["metadata"]["name"] in ours:
            continue
        labels = role["metadata"].get("labels") or {}
        for target in USER_ROLES:
            if labels.get(f"rbac.authorization.k8s.io/aggregate-to-{target}") == "true":
                out.append((role, target))
                break
    return out


def _work(env, exercise_id: str) -> list[tuple[str, str, dict | None]]:
    """(phrase, resource, the object as it is now) for each piece of the student's work a reset of
    the exercise would revert (object None: a process, not an object)."""
    c = client(env)
    out = []
    if exercise_id == "alice":
        for csr in c.list("certificates.k8s.io/v1", "certificatesigningrequests")[0]:
            issued = " (a certificate it issued stays good for the check; `kubectl apply -f` of the saved file brings " \
                "the request back Pending, without it)" if (csr.get("status") or {}).get("certificate") else ""
            out.append((f"the CertificateSigningRequest {csr['metadata']['name']}{issued}", "certificatesigningrequests",
                        csr))
        for resource, b in _bindings_of(c, _alice_subject):
            out.append((f"the {b['kind']} {_where(b)} that names alice", resource, b))
        for role, target in _folded_into_user_roles(c):
            out.append((f"the ClusterRole {role['metadata']['name']}, which adds its rules to the ClusterRole {target} "
                        "(the reset gives back the cluster's own)", "clusterroles", role))
    elif exercise_id == "forbidden":
        for resource, b in _forbidden_bindings(c):
            out.append((f"the {b['kind']} {_where(b)}", resource, b))
        for resource, built in (("roles", ROLE), ("rolebindings", BINDING)):
            live = c.get_or_none(RBAC, resource, built["metadata"]["name"], "shop")
            if not _same(live, built, ("rules", "roleRef", "subjects")):
                what = "deleted" if live is None else "changed"
                out.append((f"your {what} {built['kind']} shop/{built['metadata']['name']}", resource, live))
    elif exercise_id == "mutating-webhook":
        for item in c.list(ADMISSION, "mutatingwebhookconfigurations")[0]:
            if ("mutatingwebhookconfigurations", item["metadata"]["name"]) not in LAB_WEBHOOKS:
                out.append((f"the MutatingWebhookConfiguration {item['metadata']['name']}",
                            "mutatingwebhookconfigurations", item))
        for resource, built, live in _lab_mutating_changed(env, c):
            out.append((f"your {'changes to' if live is not None else 'deletion of'} the lab's {built['kind']} "
                        f"{built['metadata']['name']}", resource, live))
        web = c.get_or_none("v1", "namespaces", WEBHOOK_NS)
        have = ((web or {}).get("metadata") or {}).get("labels") or {}
        for key, value in NAMESPACES[WEBHOOK_NS]["labels"].items():
            if web is not None and have.get(key) != value:
                now = f"you set to {have[key]}" if key in have else "you removed"
                out.append((f"the label {key}={value} of the namespace {WEBHOOK_NS}, which {now} (the reset puts it "
                            "back: it is where the exercise's webhook acts)", "namespaces", web))
        for served in webhook.all_served(env):
            if served.running:
                out.append((f"the webhook {served.name} that `labkit requests webhook serve` runs (it is stopped; "
                            "its file and port stay: serving it again with `--name "
                            f"{served.name}` gives it back the URL your saved configuration names)", "", None))
    elif exercise_id == "image-tag-policy":
        for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
            for item in c.list(ADMISSION, resource)[0]:
                kind = "ValidatingAdmissionPolicy" + ("Binding" if resource.endswith("bindings") else "")
                out.append((f"the {kind} {item['metadata']['name']}", resource, item))
    elif exercise_id == "outage":
        for resource, built, live in _hooks_as_built(env, c):
            if live is not None or c.get_or_none(ADMISSION, resource, built["metadata"]["name"]) is None:
                kind = built["kind"]
                out.append((f"your {'changes to' if live is not None else 'deletion of'} the {kind} "
                            f"{built['metadata']['name']}", resource, live))
        service = c.get_or_none("v1", "services", POLICY_NAME, POLICY_NS)
        if service is None or (service.get("spec") or {}).get("selector") != BACKEND_SELECTOR:
            out.append((f"your {'deletion of' if service is None else 'changes to'} the Service {POLICY_NS}/{POLICY_NAME}",
                        "services", service))
        deployment = c.get_or_none("apps/v1", "deployments", POLICY_NAME, POLICY_NS)
        if deployment is None or (deployment.get("spec") or {}).get("replicas") != 1:
            out.append((f"the scale of the Deployment {POLICY_NS}/{POLICY_NAME}", "deployments", deployment))
    return out


def _where(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NAME_LABEL = "kubernetes.io/metadata.name"      # the server sets it on every namespace


def _namespace_work(env) -> list[tuple[str, str, dict | None]]:
    """(phrase, resource, the Namespace as it is now) for each change of the student's to the
    namespaces that only a rebuild of the whole lab reverts (no exercise's reset touches them, but
    for web's label pod-labeler=enabled, which a reset of mutating-webhook puts back):
    labels added to, changed on or removed from the lab's and the cluster's namespaces, namespaces
    made and namespaces deleted."""
    c = client(env)
    live = {n["metadata"]["name"]: n for n in c.list("v1", "namespaces")[0]}
    built = {**{ns: {} for ns in SYSTEM_NAMESPACES}, **{ns: dict(spec["labels"]) for ns, spec in NAMESPACES.items()}}
    out = []
    for name in sorted(live):
        obj = live[name]
        if name not in built:
            out.append((f"the namespace {name} you made, with everything in it (the rebuild has no such namespace)",
                        "namespaces", obj))
            continue
        have = {k: v for k, v in ((obj["metadata"].get("labels") or {}).items()) if k != NAME_LABEL}
        want = built[name]
        for key in sorted(set(have) | set(want)):
            if key not in want:
                out.append((f"the label {key}={have[key]} you added to the namespace {name} (the rebuild removes it)",
                            "namespaces", obj))
            elif key not in have:
                out.append((f"the label {key}={want[key]} you removed from the namespace {name} (the rebuild puts it "
                            "back)", "namespaces", obj))
            elif have[key] != want[key]:
                out.append((f"the label {key} of the namespace {name}, which you set to {have[key]} (the rebuild sets "
                            f"it back to {want[key]})", "namespaces", obj))
    for name in sorted(set(built) - set(live)):
        out.append((f"the namespace {name}, which you deleted (the rebuild makes it again)", "namespaces", None))
    return out


def student_work(env, exercise_id: str | None) -> list[str]:
    """What a reset of the exercise (None: of the whole lab) would revert of the student's work; a
    rebuild of the whole lab also reverts the namespaces' labels and namespaces made or deleted."""
    if not is_up(env):
        return []
    if exercise_id is not None:
        return [phrase for phrase, _, _ in _work(env, exercise_id)]
    return [phrase for phrase, _, _ in _lab_work(env)]


def _lab_work(env) -> list[tuple[str, str, dict | None]]:
    """What a rebuild of the whole lab reverts: every exercise's work, and the namespaces' changes
    as _namespace_work words them (web's label, which mutating-webhook's reset also lists, once)."""
    return [item for ex in EXERCISES for item in _work(env, ex) if item[1] != "namespaces"] + _namespace_work(env)


def keep_student_work(env, exercise_id: str | None) -> list[str]:
    """Before a rebuild of the whole lab (a new API server: nothing of the old one stays): every
    exercise's objects that student_work lists and the namespaces whose labels the student changed
    or that they made, as YAML `kubectl apply -f` takes back. A one-exercise reset keeps its own
    objects (reset_exercise)."""
    if exercise_id is not None or not is_up(env):
        return []
    work = _lab_work(env)
    saved = _save(env, "lab", work)
    if saved is None:
        return []
    removed = [phrase for phrase, _, _ in work if " you removed from the namespace " in phrase]
    # `kubectl apply` adds and changes labels; one the rebuild puts back is not in the kept object,
    # and apply removes only what its own last-applied configuration had
    again = ("; a label you had removed is put back by the rebuild and stays after `kubectl apply`: remove it "
             "again with `kubectl label namespace NAME KEY-`") if removed else ""
    return [f"your objects and namespaces that the rebuild reverts are kept in {saved} (`kubectl apply -f` brings "
            f"them back){again}"]


def _save(env, exercise_id: str, work=None) -> Path | None:
    """Keep the student's objects that the reset removes or restores (`work`: the exercise's, by
    default), as YAML in the lab's directory; returns the file (None when there is nothing to keep)."""
    kinds = {"namespaces": ("v1", "Namespace"),
             "certificatesigningrequests": ("certificates.k8s.io/v1", "CertificateSigningRequest"),
             "roles": (RBAC, "Role"), "clusterroles": (RBAC, "ClusterRole"), "rolebindings": (RBAC, "RoleBinding"),
             "clusterrolebindings": (RBAC, "ClusterRoleBinding"),
             "mutatingwebhookconfigurations": (ADMISSION, "MutatingWebhookConfiguration"),
             "validatingwebhookconfigurations": (ADMISSION, "ValidatingWebhookConfiguration"),
             "validatingadmissionpolicies": (ADMISSION, "ValidatingAdmissionPolicy"),
             "validatingadmissionpolicybindings": (ADMISSION, "ValidatingAdmissionPolicyBinding"),
             "services": ("v1", "Service"), "deployments": ("apps/v1", "Deployment")}
    objects, seen = [], set()
    for _, resource, obj in (_work(env, exercise_id) if work is None else work):
        if obj is not None and (resource, _where(obj)) not in seen:
            seen.add((resource, _where(obj)))
            api_version, kind = kinds[resource]
            objects.append({"apiVersion": api_version, "kind": kind, **{k: v for k, v in obj.items()
                                                                          if k not in ("apiVersion", "kind")}})
    if not objects:
        return None
    directory = Path(env.dir) / SAVED_DIR
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{exercise_id}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.yaml"
    for obj in objects:        # as `kubectl apply -f` takes them back
        for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
            (obj.get("metadata") or {}).pop(key, None)
        if obj["kind"] != "CertificateSigningRequest":
            obj.pop("status", None)
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def reset_csrs(env) -> list[dict]:
    """The CertificateSigningRequests that resets of exercise alice removed, as their saved files
    keep them (with the status that holds the certificate each issued): `kubectl apply -f` brings
    such a request back Pending and without its certificate, and approving it again issues another."""
    out = []
    for path in sorted((Path(env.dir) / SAVED_DIR).glob("alice-*.yaml")):
        try:
            out += [d for d in yaml.safe_load_all(path.read_text())
                    if isinstance(d, dict) and d.get("kind") == "CertificateSigningRequest"]
        except (OSError, yaml.YAMLError):
            continue
    return out


def reset_exercise(env, exercise_id: str) -> None:
    c = client(env)
    saved = _save(env, exercise_id) if exercise_id in EXERCISES else None
    if exercise_id == "alice":
        for csr in c.list("certificates.k8s.io/v1", "certificatesigningrequests")[0]:
            _delete(c, "certificates.k8s.io/v1", "certificatesigningrequests", csr["metadata"]["name"])
        _unbind(c, _alice_subject)
        folded = _folded_into_user_roles(c)
        for role, _ in folded:
            _delete(c, RBAC, "clusterroles", role["metadata"]["name"])
        if folded:
            # the clusterrole-aggregation controller then gives view (edit, admin) back their own rules
            built = {r["metadata"]["name"]: r for r in rbac_as_built() if "roleRef" not in r and r.get("kind") != "Role"}
            for target in sorted({t for _, t in folded}):
                _wait(lambda t=target: _rule_set(c.get(RBAC, "clusterroles", t).get("rules"))
                      == _rule_set(built[t].get("rules")), f"the ClusterRole {target} to have its own rules again")
    elif exercise_id == "forbidden":
        for resource, b in _forbidden_bindings(c):
            _delete(c, RBAC, resource, b["metadata"]["name"], b["metadata"].get("namespace"))
        for resource, obj in (("roles", ROLE), ("rolebindings", BINDING)):
            _delete(c, RBAC, resource, obj["metadata"]["name"], "shop")
            c.create(RBAC, resource, obj, "shop")
    elif exercise_id == "mutating-webhook":
        for item in c.list(ADMISSION, "mutatingwebhookconfigurations")[0]:
            if ("mutatingwebhookconfigurations", item["metadata"]["name"]) not in LAB_WEBHOOKS:
                _delete(c, ADMISSION, "mutatingwebhookconfigurations", item["metadata"]["name"])
        for resource, built, _ in _lab_mutating_changed(env, c):
            _delete(c, ADMISSION, resource, built["metadata"]["name"])
            c.create(ADMISSION, resource, built)
        # the exercise's namespace keeps the label its webhook acts on (other labels are the
        # rebuild's business, _namespace_work)
        if c.get_or_none("v1", "namespaces", WEBHOOK_NS) is not None:
            c.patch("v1", "namespaces", WEBHOOK_NS, {"metadata": {"labels": NAMESPACES[WEBHOOK_NS]["labels"]}})
        # stopped, not forgotten: served again under its name it gets its port back, so the
        # configuration the reset saved (`kubectl apply -f`) reaches it again
        for served in webhook.all_served(env):
            webhook.stop(env, served.name)
    elif exercise_id == "image-tag-policy":
        for resource in ("validatingadmissionpolicybindings", "validatingadmissionpolicies"):
            for item in c.list(ADMISSION, resource)[0]:
                _delete(c, ADMISSION, resource, item["metadata"]["name"])
    elif exercise_id == "outage":
        for resource, obj in webhook_configurations(env):
            _delete(c, ADMISSION, resource, obj["metadata"]["name"])
        for api_version, resource in (("apps/v1", "deployments"), ("v1", "services")):
            _delete(c, api_version, resource, POLICY_NAME, POLICY_NS)
            _wait(lambda: c.get_or_none(api_version, resource, POLICY_NAME, POLICY_NS) is None, f"{resource} to go")
        _wait(lambda: not c.list("v1", "pods", POLICY_NS)[0], "the pod-policy Pods to go")
        _backend_objects(env, c)
        _policy_webhooks(env, c)
    elif exercise_id == "audit":
        _audit_scene(env, c)
        at = datetime.datetime.fromtimestamp(audit_scene_start(env), datetime.timezone.utc)
        print(f"the scene of exercise audit is set again, with who reads, changes and deletes the ConfigMaps drawn "
              f"anew: the audit log keeps the earlier scene's events, those received before "
              f"{at.strftime('%Y-%m-%dT%H:%M:%SZ')}", file=sys.stderr)
    env.log(f"exercise {exercise_id} built afresh" + (f"; your objects it removed or restored are kept in {saved}"
                                                      if saved else ""))
    if saved:
        print(f"your objects of exercise {exercise_id} that the reset removed or restored are kept in {saved} "
              "(`kubectl apply -f` brings them back)", file=sys.stderr)


def _delete(c, api_version, resource, name, namespace=None) -> None:
    try:
        c.delete(api_version, resource, name, namespace)
    except ApiError as exc:
        if exc.code != 404:
            raise


def _unbind(c, subject_matches, keep=frozenset()) -> None:
    """Delete every RoleBinding and ClusterRoleBinding with a subject that matches (but `keep`)."""
    for resource in ("rolebindings", "clusterrolebindings"):
        for item in c.list(RBAC, resource)[0]:
            meta = item["metadata"]
            if (meta.get("namespace"), meta["name"]) in keep:
                continue
            if any(subject_matches(s, meta.get("namespace") or "") for s in item.get("subjects") or []):
                _delete(c, RBAC, resource, meta["name"], meta.get("namespace"))


def _wait(predicate, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise LabkitError(f"timed out waiting for {what}")


def is_up(env):
    if not (Path(env.dir) / AUDIT_FILE).exists():
        return False
    return server_alive(server_dir(env)) and procs.alive(env, BACKEND_TAG)


def access(env):
    t = target(env)
    return f"""## Your cluster

Everything lives on {t.description}; your kubeconfig is its admin's (the ClusterRole cluster-admin).

```sh
export KUBECONFIG={t.kubeconfig}
kubectl get namespaces
labkit requests explain -- kubectl get pods -n shop     # what each stage decided
```

The audit log is {t.state_dir / 'audit.log'}.
"""


# -- what the solutions and common mistakes do, as a person would -------------------------------

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client"


def kubectl(env, *args, input=None) -> str:
    return target(env).kubectl(*args, input=input)


def make_certificate(env, directory: Path, user: str, cn: str | None = None, signer: str = CLIENT_SIGNER,
                     groups: tuple[str, ...] = ()) -> tuple[Path, Path | None]:
    """A key and CSR as `openssl req -new -newkey rsa:2048 -nodes -subj /CN=<cn>/O=<group>` makes
    them (an unencrypted PKCS#8 RSA key, the subject's RDNs in that order), a
    CertificateSigningRequest object, `kubectl certificate approve`, the certificate from
    .status.certificate: (key, certificate or None when none was issued)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    from labkit.apiserver.certs import write_private

    directory.mkdir(parents=True, exist_ok=True)
    key, csr, crt = directory / f"{user}.key", directory / f"{user}.csr", directory / f"{user}.crt"
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn or user)]
                        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups])
    request = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(private, hashes.SHA256())
    write_private(key, private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
    csr.write_bytes(request.public_bytes(serialization.Encoding.PEM))
    obj = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": user},
           "spec": {"request": base64.b64encode(csr.read_bytes()).decode(), "signerName": signer,
                    "expirationSeconds": 86400, "usages": ["client auth"]}}
    kubectl(env, "delete", "csr", user, "--ignore-not-found")     # one of an earlier try
    kubectl(env, "create", "-f", "-", input=json.dumps(obj))
    kubectl(env, "certificate", "approve", user)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        issued = kubectl(env, "get", "csr", user, "-o", "jsonpath={.status.certificate}").strip()
        if issued:
            crt.write_bytes(base64.b64decode(issued))
            return key, crt
        time.sleep(0.1)
    return key, None


def write_kubeconfig(env, path: Path, user: str, cert: Path | None = None, key: Path | None = None,
                     token: str | None = None) -> Path:
    """A kubeconfig for `user`: the lab's cluster, and the user's certificate (or a token)."""
    info = read_server_info(server_dir(env))
    admin = yaml.safe_load(info.kubeconfig.read_text())
    ca = base64.b64decode(admin["clusters"][0]["cluster"]["certificate-authority-data"])
    ca_file = path.with_suffix(".ca.crt")
    ca_file.write_bytes(ca)
    k = ["--kubeconfig", str(path)]
    kubectl(env, "config", "set-cluster", "labkit", f"--server={info.url}", f"--certificate-authority={ca_file}",
            "--embed-certs", *k)
    if token:
        kubectl(env, "config", "set-credentials", user, f"--token={token}", *k)
    else:
        kubectl(env, "config", "set-credentials", user, f"--client-certificate={cert}", f"--client-key={key}", *k)
    kubectl(env, "config", "set-context", user, "--cluster=labkit", f"--user={user}", "--namespace=dev", *k)
    kubectl(env, "config", "use-context", user, *k)
    return path


def bind(env, name: str, namespace: str | None, role_kind: str, role: str, subject: dict) -> None:
    """A RoleBinding (namespace) or ClusterRoleBinding (None) as `kubectl apply` makes it."""
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    obj = {"apiVersion": RBAC, "kind": kind, "metadata": meta,
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
           "subjects": [subject]}
    kubectl(env, "apply", "-f", "-", input=json.dumps(obj))


def serve_webhook(env, source: str, name: str = "labeler"):
    """Write `source` as the student's webhook file and serve it with the lab's runner."""
    directory = Path(env.dir) / "student"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(source)
    return webhook.serve(env, path, name)


POD_CREATIONS = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]


def register_mutating(env, served, *, namespace_selector=None, side_effects="None", failure="Fail", name="labeler",
                      rules=None, object_selector=None, match_conditions=None):
    hook = {"name": f"{name}.example.com", "admissionReviewVersions": ["v1"], "sideEffects": side_effects,
            "failurePolicy": failure, "timeoutSeconds": 5, "rules": rules or POD_CREATIONS,
            "clientConfig": {"url": f"{served.url}/mutate", "caBundle": pki.ca_bundle(webhook.pki_dir(env))}}
    if namespace_selector is not None:
        hook["namespaceSelector"] = namespace_selector
    if object_selector is not None:
        hook["objectSelector"] = object_selector
    if match_conditions is not None:
        hook["matchConditions"] = match_conditions
    obj = {"apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
           "webhooks": [hook]}
    kubectl(env, "apply", "-f", "-", input=json.dumps(obj))


def start_outage(env) -> None:
    """What the outage prompt asks: the backend scaled to zero, then a Pod creation that fails."""
    c = client(env)
    kubectl(env, "-n", POLICY_NS, "scale", "deployment", POLICY_NAME, "--replicas=0")
    _wait(lambda: not backend_ready(c), "the pod-policy backend to be down")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
           "spec": {"containers": [{"name": "probe", "image": "nginx:1.27"}]}}
    code, _ = c.request("POST", "/api/v1/namespaces/shop/pods", None, pod)
    if code != 500:
        raise LabkitError(f"the outage did not happen: creating a Pod answered {code}")
