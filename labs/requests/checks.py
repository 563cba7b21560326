"""Checks of the requests lab.

The truth comes from the live API server, asked the way the exercise's subject would ask it:
as alice with her own certificate, as the ServiceAccount with a token from the TokenRequest API,
by creating Pods (dry runs: nothing is stored) that pass through the real admission chain — and
from the audit log. Feedback names what is wrong and where to look, never the answer.
"""

import base64
import copy
import datetime
import re
import uuid

from labkit.apiserver.audit import received_at
from labkit.apiserver.client import HttpClient, KubeConfig
from labkit.exercises import LIVE, CheckFailed, NotJudged
from labkit.requests import reconstruct

ADMISSION = "admissionregistration.k8s.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"


def _lab(env):
    return env.lab.environment_module()


def _admin(ctx) -> HttpClient:
    return _lab(ctx.env).client(ctx.env)


def _message(body) -> str:
    return (body or {}).get("message", "") if isinstance(body, dict) else str(body)


def _probe_pod(c, namespace, *, labels=None, image="nginx:1.27", init_image=None, name=None):
    """Create a Pod as a dry run (nothing is stored): (code, body) of the API server's answer."""
    meta = {"name": name or f"probe-{uuid.uuid4().hex[:6]}"}
    if labels is not None:
        meta["labels"] = labels
    spec = {"containers": [{"name": "app", "image": image}]}
    if init_image:
        spec["initContainers"] = [{"name": "init", "image": init_image}]
    return c.request("POST", f"/api/v1/namespaces/{namespace}/pods", {"dryRun": "All"},
                     {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def _patch_note(message: str) -> str:
    """What a webhook's failed answer means (mutating/dispatcher.go: an answer that is not a valid
    AdmissionReview response fails the call; a JSON Patch whose operation cannot be applied to the
    object fails the request)."""
    text = message.lower()
    if "invalid webhook response" in text:
        return " Your webhook's answer is not a valid AdmissionReview response: the error says which field."
    # evanphx/json-patch v4's failures (labkit.apiserver.jsonpatch): a path that does not lead
    # anywhere, a key or index that is not there, a failed test, an unknown operation
    if any(w in text for w in ("does not apply", "nonexistent key", "invalid index", "proper array index",
                               "test failed", "unexpected kind")):
        return " The JSON Patch your webhook answered could not be applied to the Pod: look at its paths."
    return ""


def _blocked_by_outage(message: str) -> str:
    """The lab's validating webhook refusing a probe because its backend is down (exercise outage:
    scoped as it asks, it still fails closed for the application namespaces while the backend is
    down, as it must)."""
    if "pod-policy" in message:
        return (" The lab's webhook pod-policy refuses Pod creations here while its backend is down (exercise "
                "outage): bring the backend back — `kubectl -n policy scale deployment pod-policy --replicas=1` — "
                "and check again.")
    return ""


# -- RBAC over the whole space ------------------------------------------------------------------

READ_VERBS = ("get", "list", "watch")


def _rbac_observation(ctx, admin) -> dict:
    return {"rbac": _lab(ctx.env).rbac_objects(admin), "space": reconstruct.discover(admin).to_observation()}


def _binding_name(b: dict) -> str:
    meta, ref = b["metadata"], b.get("roleRef") or {}
    where = f"RoleBinding {meta.get('namespace')}/{meta['name']}" if b.get("kind") == "RoleBinding" \
        else f"ClusterRoleBinding {meta['name']}"
    return f"the {where} (of the {ref.get('kind', '?')} {ref.get('name', '?')})"


def _rules_key(rules) -> list[str]:
    import json
    return sorted(json.dumps(r, sort_keys=True) for r in rules or [])


def _roles_changed_note(rbac: list[dict], built: list[dict], via: list[dict]) -> str:
    """A sentence when a role that `via` binds is not as the lab built it (a ClusterRole such as
    view whose rules grew, also through a ClusterRole of one's own that the aggregation controller
    folds into it: pkg/controller/clusterroleaggregation), naming what was added to it; else "".
    Such a change grants the same to everyone the role is bound to."""
    def key(o):
        return (o.get("kind"), (o.get("metadata") or {}).get("namespace"), o["metadata"]["name"])
    now = {key(o): o for o in rbac if o.get("kind") in ("Role", "ClusterRole")}
    then = {key(o): o for o in built if o.get("kind") in ("Role", "ClusterRole")}
    notes = []
    for b in via:
        ref = b.get("roleRef") or {}
        k = (ref.get("kind"), (b["metadata"].get("namespace") if ref.get("kind") == "Role" else None), ref.get("name"))
        if k not in then or k not in now or _rules_key(now[k].get("rules")) == _rules_key(then[k].get("rules")):
            continue
        label = f"rbac.authorization.k8s.io/aggregate-to-{ref.get('name')}"
        folded = sorted(o["metadata"]["name"] for kk, o in now.items()
                        if kk not in then and ((o["metadata"].get("labels") or {}).get(label) == "true"))
        how = (f": the ClusterRole{'s' if len(folded) > 1 else ''} {', '.join(folded)}, labelled {label}=true, "
               + ("add their rules to it" if len(folded) > 1 else "adds its rules to it") if folded
               else ": its rules were changed")
        notes.append(f"; the {ref.get('kind')} {ref.get('name')} is not as the cluster has it{how}, for everyone it "
                     "is bound to — leave the cluster's roles as they are")
    return "".join(dict.fromkeys(notes))


def _case_note(rbac: list[dict], kind: str, name: str) -> str:
    """A sentence when a binding's subject of `kind` differs from `name` only in case, else "":
    RBAC compares subjects' names as they are (pkg/registry/rbac/validation/rule.go
    appliesToUser: `user.GetName() == subject.Name`; a ServiceAccount's username likewise), so
    `Alice` is another user than `alice`; for a User, also when a binding names a Group or a
    ServiceAccount of that name (a subject applies by its kind).
    `name` is the exercise's own (its prompt states it)."""
    for b in rbac:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        for subject in b.get("subjects") or []:
            other = subject.get("name") or ""
            if subject.get("kind") == kind and other != name and other.lower() == name.lower():
                what, binding = ("user" if kind == "User" else kind), _binding_name(b)
                return (f". {binding[0].upper()}{binding[1:]} names the {what} {other}, not {name}: names are "
                        "case-sensitive")
    if kind != "User":
        return ""
    for b in rbac:      # the user's name under another kind: a Group or a ServiceAccount named alice
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        for subject in b.get("subjects") or []:
            if subject.get("kind") in ("Group", "ServiceAccount") and subject.get("name") == name:
                binding = _binding_name(b)
                return (f". {binding[0].upper()}{binding[1:]} names a {subject['kind']} {name}: a subject applies by "
                        f"its kind (appliesToUser), and {name} is a User, in no group of that name")
    return ""


def _more(items, shown: int = 1) -> str:
    return f" (and {len(items) - shown} more)" if len(items) > shown else ""


def _requests(grants) -> set:
    """The grants as feedback counts requests: a request on one named object is left out when the
    same request on any object (name "") is among them. A rule allows the name "" only when it
    lists no resourceNames, and then every name (ResourceNameMatches,
    pkg/apis/rbac/v1/evaluation_helpers.go), so `get pods in shop` stands for each Pod's get too;
    access() lists every name RBAC rules name besides."""
    anyname = {g[:4] for g in grants if not g[4]}
    return {g for g in grants if not g[4] or g[:4] not in anyname}


def _more_requests(grants) -> str:
    """The "(and N more)" after the one request feedback names of `grants` (_pick): N counts the
    other requests (_requests), not every object they name."""
    return _more(_requests(grants))


def _pick(grants, prefer=(), namespace=None) -> tuple:
    """The grant feedback names: of `prefer`'s resources first (in that order), in `namespace`,
    a plain verb (get, list, ... before the special ones)."""
    def key(g):
        rank = prefer.index(g[3]) if g[3] in prefer else len(prefer)
        verb = reconstruct.VERBS.index(g[1]) if g[1] in reconstruct.VERBS else len(reconstruct.VERBS)
        return rank, g[0] != namespace, verb, g
    return min(grants, key=key)


def _view_binding(user: str, namespace: str) -> dict:
    """Exercise alice's reference grant: the read-only ClusterRole view, bound to her in one namespace."""
    return {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "reference", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}


def _role_binding(namespace: str, account: str, role: str) -> dict:
    """Exercise forbidden's reference grant: the Role bound to the ServiceAccount of its namespace."""
    return {"apiVersion": RBAC, "kind": "RoleBinding", "metadata": {"name": "reference", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]}


def _references(ctx) -> list[dict]:
    """What the lab's RBAC exercises ask for, as bindings: one exercise's solution is not a gain
    the other's check holds against it."""
    alice, forbidden = ctx.lab.exercise("alice").params, ctx.lab.exercise("forbidden").params
    return [_view_binding(alice["user"], alice["namespace"]),
            _role_binding(forbidden["namespace"], forbidden["account"], forbidden["role"])]


def _subjects(*object_lists) -> list[reconstruct.Subject]:
    """Every subject any binding of `object_lists` names, as a request's user (its kind's groups)."""
    found = {reconstruct.Subject.of(s, (b.get("metadata") or {}).get("namespace") or "")
             for objects in object_lists for b in objects if b.get("kind") in ("RoleBinding", "ClusterRoleBinding")
             for s in b.get("subjects") or []}
    return sorted(found, key=lambda s: (s.user, s.groups))


def _others_gained(ctx, obs, target: reconstruct.Subject, before_objects, space, other_exercise: str) -> str:
    """A sentence when any subject but `target` may now do what the lab as built (plus what the
    lab's RBAC exercises ask for) did not let it, else "". Every user, group and ServiceAccount
    that any binding, old or new, names is asked about over the whole space: access changes only
    through a binding that names the subject, or a role such a binding refers to (RBAC only ever
    allows, plugin/pkg/auth/authorizer/rbac/rbac.go); a subject whose rules are the same in every
    namespace (the rule resolver's answer, pkg/registry/rbac/validation/rule.go) gained nothing.
    The bindings that are the student's work on `other_exercise` are that exercise's check's."""
    lab = _lab(ctx.env)
    current = [o for o in obs["rbac"] if not lab.exercise_binding(o, other_exercise)]
    baseline = before_objects + _references(ctx)
    now, then = reconstruct.Objects(current), reconstruct.Objects(baseline)
    spaces = ["", *space.namespaces]
    for other in _subjects(baseline, current):
        if other.user == target.user:           # the same user name is the same identity (a User subject
            continue                            # may name a ServiceAccount's: rbac.go appliesToUser)
        if reconstruct.rules(now, other, spaces) == reconstruct.rules(then, other, spaces):
            continue
        gained = reconstruct.access(now, other, space) - reconstruct.access(then, other, space)
        if not gained:
            continue
        via = reconstruct.bindings_granting(current, other, gained)
        which = ", ".join(_binding_name(b) for b in sorted(via, key=_binding_name)) or "a change of a role"
        return (f"{which} also grants {other.label}: it may now "
                f"{reconstruct.describe(_pick(gained))}{_more_requests(gained)} — grant nothing to anyone else")
    return ""


# -- alice --------------------------------------------------------------------------------------

def _subject(pem: bytes) -> tuple[str, list[str]] | None:
    """The certificate's common name and organizations in the subject's order (the user and
    groups the API server's x509 authenticator takes, request/x509/x509.go
    CommonNameUserConversion), or None when `pem` is not a PEM certificate."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    try:
        subject = x509.load_pem_x509_certificate(pem).subject
    except ValueError:
        return None
    # Go's crypto/x509/pkix Name.FillFromRDNSequence: the last CN is the CommonName, every O an Organization
    cn = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return (str(cn[-1].value) if cn else ""), [str(o.value) for o in orgs]


def _key_matches(cert: bytes, key: bytes) -> bool:
    """Whether the private key belongs to the certificate (what TLS needs to use them)."""
    import ssl
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        from pathlib import Path
        c, k = Path(tmp) / "c.pem", Path(tmp) / "k.pem"
        c.write_bytes(cert)
        k.write_bytes(key)
        try:
            # no password: an encrypted key is not asked for on a terminal, it does not load
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(str(c), str(k), password=lambda: b"")
        except (ssl.SSLError, ValueError):
            return False
    return True


def _refused_requests(ctx) -> list[str]:
    """What the API server answered each CertificateSigningRequest create it refused with 403
    since the lab was ready (admission: CertificateSubjectRestriction), from its audit log."""
    events = _lab(ctx.env).target(ctx.env).audit(since=ctx.ready_time) or []
    return [(e.get("responseStatus") or {}).get("message", "") for e in events
            if (e.get("objectRef") or {}).get("resource") == "certificatesigningrequests"
            and not (e.get("objectRef") or {}).get("subresource") and e.get("verb") == "create"
            and (e.get("responseStatus") or {}).get("code") == 403]


CERTIFICATE_CONTROLLER = "system:serviceaccount:kube-system:certificate-controller"


def _certificates_signed(ctx) -> list[bytes]:
    """The certificates the csrsigning controller wrote into CertificateSigningRequests' status,
    from the audit log (writes are audited at level Request, with the body): a request deleted
    afterwards issued its certificate all the same — by hand, or by kube-controller-manager's
    csrcleaner an hour after it was issued upstream (pkg/controller/certificates/cleaner/cleaner.go
    `approvedExpiration`). Only the controller's writes count: a certificate someone else wrote
    into a request's status was not signed through it."""
    events = _lab(ctx.env).target(ctx.env).audit(containing=CERTIFICATE_CONTROLLER) or []
    out = []
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource") == "certificatesigningrequests" and ref.get("subresource") == "status"
                and (e.get("user") or {}).get("username") == CERTIFICATE_CONTROLLER
                and e.get("verb") in ("update", "patch") and (e.get("responseStatus") or {}).get("code") == 200):
            encoded = ((e.get("requestObject") or {}).get("status") or {}).get("certificate")
            if encoded:
                try:
                    out.append(base64.b64decode(encoded))
                except ValueError:
                    continue
    return out


def observe_alice(ctx) -> dict:
    from pathlib import Path
    path = Path(ctx.answer_field(ctx.answer(), "kubeconfig", str)).expanduser()
    obs = {"kubeconfig": str(path), "problem": "", "token": False, "certificate": False, "subject": None,
           "key_matches": False, "issued": False, "whoami": None, "refused": _refused_requests(ctx)}
    if not path.is_file():
        obs["problem"] = f"the kubeconfig your answer names does not exist: {path}"
        return obs
    try:
        config = KubeConfig(path)
    except Exception as exc:
        obs["problem"] = f"cannot read the kubeconfig {path}: {exc}"
        return obs
    obs["token"] = bool(config.user.get("token") or config.user.get("tokenFile"))
    try:
        cert, key = config.client_credentials()
    except OSError as exc:
        obs["problem"] = f"the kubeconfig {path} names a certificate or key file that cannot be read: {exc}"
        return obs
    admin = _admin(ctx)
    obs.update(_rbac_observation(ctx, admin))
    if not cert or not key:
        return obs
    obs["certificate"] = True
    subject = _subject(cert)
    obs["subject"] = list(subject) if subject else None
    obs["key_matches"] = subject is not None and _key_matches(cert, key)
    # the CSRs of this cluster, and those a reset of the exercise removed (kept in its saved file):
    # a certificate they issued stays what it was (the reset revokes nothing, as deleting a CSR
    # does not; kube-controller-manager's csrcleaner deletes issued CSRs after an hour upstream)
    csrs = admin.list("certificates.k8s.io/v1", "certificatesigningrequests")[0] + _lab(ctx.env).reset_csrs(ctx.env)
    issued = [base64.b64decode(r["status"]["certificate"]) for r in csrs if (r.get("status") or {}).get("certificate")]
    obs["issued"] = any(c.strip() == cert.strip() for c in issued + _certificates_signed(ctx))
    obs["encrypted"] = b"ENCRYPTED" in key
    if obs["key_matches"] and obs["issued"]:
        try:
            alice = HttpClient.from_kubeconfig(path, user_agent="labkit-check")
            code, body = alice.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", None,
                                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        except Exception as exc:        # the cluster part: another server, a CA that does not fit
            code, body = 0, {"message": f"{type(exc).__name__}: {exc}"}
        info = ((body.get("status") or {}).get("userInfo") or {}) if code == 201 and isinstance(body, dict) else {}
        obs["whoami"] = {"code": code, "message": _message(body), "username": info.get("username"),
                         "groups": list(info.get("groups") or [])}
    return obs


def _refusal_note(obs) -> str:
    """Why no certificate came, when the API server refused a request naming system:masters."""
    masters = [m for m in obs.get("refused") or [] if "system:masters" in m]
    if not masters:
        return ""
    return (f". The API server refused a CertificateSigningRequest because its subject names the group "
            f"system:masters (O=system:masters): {masters[-1]}. Every O of the CSR's subject becomes a group of "
            "the user; that request was never stored, so no certificate was issued for it")


def judge_alice(ctx, obs) -> object:
    user, ns = ctx.params["user"], ctx.params["namespace"]
    path = obs["kubeconfig"]
    if obs["problem"]:
        raise CheckFailed(obs["problem"] + _refusal_note(obs))
    if obs["token"] and obs["certificate"]:
        # kube-apiserver tries the x509 authenticator before the token ones and the first that
        # recognises the request wins (pkg/kubeapiserver/authenticator/config.go `Config.New`,
        # request/union/union.go): the server sees the certificate's user, but the file hands out the token
        raise CheckFailed(f"the kubeconfig {path} holds a bearer token besides the client certificate: the API "
                          "server takes the certificate first, but whoever has the file has the token too, and "
                          f"whatever it stands for. A kubeconfig of {user}'s holds her certificate and key only")
    if obs["token"]:
        raise CheckFailed(f"the kubeconfig {path} authenticates with a token, not with {user}'s client certificate")
    if not obs["certificate"]:
        raise CheckFailed(f"the kubeconfig {path} has no client certificate and key for its user" + _refusal_note(obs))
    if obs["subject"] is None:
        raise CheckFailed(f"the client certificate in the kubeconfig {path} is not a PEM certificate")
    if obs.get("encrypted"):
        raise CheckFailed(f"the private key in the kubeconfig {path} is encrypted: a client must read it without a "
                          "passphrase (openssl req -nodes)")
    if not obs["key_matches"]:
        raise CheckFailed(f"the private key in the kubeconfig {path} does not belong to its client certificate "
                          "(kubectl, with Go's crypto/tls, refuses the pair: `tls: private key does not match public "
                          "key`): a certificate works only with the key its CSR was made from (compare `openssl x509 "
                          "-noout -pubkey` of the certificate with `openssl pkey -pubout` of the key)" +
                          _refusal_note(obs))
    cn, orgs = obs["subject"]
    if cn != user:
        raise CheckFailed(f"the certificate in {path} has the common name (CN) {cn or 'none'!r}: the API server takes "
                          f"the user name from the CN, so it does not stand for {user}")
    if not obs["issued"]:
        raise CheckFailed(f"the certificate in {path} was not issued through a CertificateSigningRequest of this cluster "
                          "(`kubectl get csr`): make it the way the exercise says" + _refusal_note(obs))
    who = obs["whoami"] or {}
    if who.get("code") == 401:
        raise CheckFailed(f"the API server does not accept the credentials of {path} (401 Unauthorized)")
    if who.get("code") == 0:
        raise CheckFailed(f"the API server cannot be reached with the kubeconfig {path} ({who.get('message')}): its "
                          "cluster part must be the one of your admin kubeconfig")
    if who.get("username") != user:
        raise CheckFailed(f"the API server sees the kubeconfig {path} as {who.get('username') or 'nobody'!r}, not {user} "
                          f"(SelfSubjectReview answered {who.get('code')}: {who.get('message', '')})")
    lab = _lab(ctx.env)
    built = lab.rbac_as_built()
    space = reconstruct.Space.from_observation(obs["space"]).covering(obs["rbac"], built)
    groups = tuple(who.get("groups") or ("system:authenticated",))
    her = reconstruct.Subject(user, groups, f"the user {user}")
    plain = reconstruct.Subject(user, ("system:authenticated",), f"the user {user}")
    expected = reconstruct.access(built + [_view_binding(user, ns)], plain, space)
    actual = reconstruct.access(obs["rbac"], her, space)
    extra_groups = [g for g in orgs if g not in ("system:authenticated",)]
    if extra_groups:
        # the x509 authenticator makes every O of the certificate a group of the user
        named = "system:masters" if "system:masters" in extra_groups else extra_groups[0]
        more = actual - expected
        what = (f" — she may {reconstruct.describe(_pick(more, ('secrets',), ns))}{_more_requests(more)}" if more else
                ": whatever that group is given, she gets, and so does anyone else whose certificate names it")
        raise CheckFailed(f"the certificate in {path} has the organization (O) {named}: the API server puts {user} "
                          f"in the group {named}" + (", whose members may do everything without RBAC being asked"
                                                      if named == "system:masters" else "") +
                          f"{what}. Make her CSR with CN={user} only, and grant the access to the user")
    extra = actual - expected
    if extra:
        writes = [g for g in extra if g[1] not in READ_VERBS]
        elsewhere = [g for g in extra if g[0] != ns]
        secrets = [g for g in extra if g[3] == "secrets"]
        via = reconstruct.bindings_granting(obs["rbac"], her, extra)
        where = f" — through {', '.join(_binding_name(b) for b in via)}" if via else ""
        where += _roles_changed_note(obs["rbac"], built, via)
        if writes:
            g = _pick(writes, ("configmaps", "pods"), ns)
            raise CheckFailed(f"{user} can write: she may {reconstruct.describe(g)}{_more_requests(writes)}{where}. "
                              "Read-only means get, list and watch, and only what a read-only user may read",
                              observed=f"{len(_requests(extra))} requests she may make beyond what view grants in {ns}",
                              observed_in=LIVE)
        if elsewhere:
            g = _pick(elsewhere, ("configmaps", "pods"), "default")
            raise CheckFailed(f"{user} can read in other namespaces or cluster-wide: she may "
                              f"{reconstruct.describe(g)}{_more_requests(elsewhere)}{where}. Her access is to {ns} "
                              "only")
        if secrets:
            raise CheckFailed(f"{user} can read the secrets in {ns}: she may {reconstruct.describe(_pick(secrets))}"
                              f"{_more_requests(secrets)}{where}. The cluster's read-only role leaves Secrets out "
                              "(they hold credentials that would let her do more)")
        # an example the server serves first: a rule's resource in a group that has no such
        # resource (cronjobs in the core group) reads like what view grants when its group is empty
        # (core/v1's subresources are served by kube-apiserver v1.34 whether or not labkit's server
        # answers them: pods/attach is no resource of another group)
        served = {(r.group, r.resource) for r in reconstruct.Space.from_observation(obs["space"]).resources}
        served |= {("", r) for r, _ in reconstruct.BUILTIN_SUBRESOURCES}
        g = _pick([x for x in extra if (x[2], x[3]) in served] or extra)
        described = reconstruct.describe(g)
        if (g[2], g[3]) not in served and not g[2]:
            described = described.replace(f" {g[3]} ", f" {g[3]} (of the core group, which serves none) ", 1)
        connect = sorted({x[3] for x in extra if not x[2] and x[3] in CONNECT_SUBRESOURCES and x[1] == "get"})
        note = (f"; get on {', '.join(connect)} is no read: a WebSocket connection to it is a GET, which kube-apiserver "
                "v1.34 authorizes with the verb get, and it runs commands in, attaches to or forwards ports of the "
                "Pod") if connect else ""
        raise CheckFailed(f"{user} may {described}{_more_requests(extra)}{where}: more than read-only access to "
                          f"{ns}{note} — look at the roles your bindings grant (`kubectl auth can-i --list -n {ns} "
                          f"--as={user}`)")
    missing = expected - actual
    if missing:
        g = _pick(missing, ("pods", "configmaps"), ns)
        raise CheckFailed(f"{user} cannot {reconstruct.describe(g)}{_more_requests(missing)}: her read access to "
                          f"{ns} is missing or partial (`kubectl auth can-i --list -n {ns} --as={user}`)"
                          + _case_note(obs["rbac"], "User", user))
    other = _others_gained(ctx, obs, plain, built, space, "forbidden")
    if other:
        raise CheckFailed(other)
    return ctx.passed(f"{user} authenticates with her certificate, reads {ns}, and may do nothing more")


# the Pod subresources whose CONNECT a WebSocket upgrade (a GET) reaches with the verb get in
# v1.34: the extra authorization of `create` (AuthorizePodWebsocketUpgradeCreatePermission) came
# in v1.35 (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go maps GET to get)
CONNECT_SUBRESOURCES = ("pods/attach", "pods/exec", "pods/portforward")


def check_alice(ctx):
    return judge_alice(ctx, observe_alice(ctx))


# -- forbidden ----------------------------------------------------------------------------------

def observe_forbidden(ctx) -> dict:
    return _rbac_observation(ctx, _admin(ctx))


def judge_forbidden(ctx, obs) -> object:
    ns, account, role_name = ctx.params["namespace"], ctx.params["account"], ctx.params["role"]
    lab = _lab(ctx.env)
    space = reconstruct.Space.from_observation(obs["space"]).covering(obs["rbac"], lab.rbac_as_built())
    role = next((o for o in obs["rbac"] if o["kind"] == "Role" and o["metadata"]["name"] == role_name
                 and o["metadata"].get("namespace") == ns), None)
    if role is None:
        raise CheckFailed(f"the Role {role_name} in {ns} was deleted: the exercise keeps the role as it is")
    if [dict(r) for r in role.get("rules") or []] != lab.ROLE["rules"]:
        raise CheckFailed(f"the Role {role_name} was changed: it says exactly what the job needs — leave the role as "
                          "it is and fix the binding")
    job = reconstruct.Subject.of({"kind": "ServiceAccount", "name": account, "namespace": ns})
    built = lab.rbac_as_built()
    fixed = _role_binding(ns, account, role_name)
    before = reconstruct.access(built, job, space)
    expected = reconstruct.access(built + [fixed], job, space)
    actual = reconstruct.access(obs["rbac"], job, space)
    extra = actual - expected
    if extra:
        via = reconstruct.bindings_granting(obs["rbac"], job, extra)
        where = f" — {', '.join(_binding_name(b) for b in via)} grants it" if via else ""
        g = _pick(extra, ("secrets", "configmaps"), ns)
        raise CheckFailed(f"the job can now {reconstruct.describe(g)}{_more_requests(extra)}{where}: it must get "
                          f"what the Role {role_name} says and nothing more")
    missing = expected - actual
    if missing:
        g = _pick(missing, ("pods",), ns)
        raise CheckFailed(f"the job is still forbidden to {reconstruct.describe(g)}{_more_requests(missing)}. "
                          f"`kubectl auth can-i list pods -n {ns} --as=system:serviceaccount:{ns}:{account}`, and "
                          "compare the binding's subject with the job's identity: kind, name and namespace"
                          + _case_note(obs["rbac"], "ServiceAccount", account))
    through = reconstruct.bindings_granting(obs["rbac"], job, expected - before)
    if not any((b.get("roleRef") or {}).get("kind") == "Role" and b["roleRef"].get("name") == role_name
               for b in through):
        raise CheckFailed(f"the job gets its access through {', '.join(_binding_name(b) for b in through)}, not "
                          f"through a binding of the Role {role_name}: the exercise fixes the binding of that role")
    other = _others_gained(ctx, obs, job, built, space, "alice")
    if other:
        raise CheckFailed(other)
    # the subject the binding named by mistake: fixing the binding corrects it — left beside the
    # right one, it still grants the role to an identity nobody meant (a ServiceAccount of that name
    # made later in its namespace would read the Pods of ns)
    without = [o for o in built if not (o["kind"] == "RoleBinding" and o["metadata"] == lab.BINDING["metadata"])]
    for subject in lab.BINDING["subjects"]:
        wrong = reconstruct.Subject.of(subject)
        stale = reconstruct.access(obs["rbac"], wrong, space) - reconstruct.access(without, wrong, space)
        if stale:
            via = reconstruct.bindings_granting(obs["rbac"], wrong, stale)
            which = ", ".join(_binding_name(b) for b in sorted(via, key=_binding_name)) or "a binding"
            raise CheckFailed(f"{which} still grants the Role {role_name} to {wrong.label}, the subject that was "
                              f"wrong: the job has its access now, but that identity (made later in its namespace) "
                              f"could {reconstruct.describe(_pick(stale, ('pods',), ns))} too — a fixed binding "
                              "names the job and nobody else")
    return ctx.passed(f"the job lists pods in {ns} through a binding of {role_name}, and may do nothing more; "
                      "nobody else gained anything, and the binding's wrong subject grants nothing any more")


def check_forbidden(ctx):
    return judge_forbidden(ctx, observe_forbidden(ctx))


# -- mutating-webhook ---------------------------------------------------------------------------

OTHER_OWNER = "other-team"


def probe_pods(label: str) -> dict:
    """The Pods the check creates (dry runs) in every namespace: with labels of their own, without
    labels, and already carrying the exercise's label with another value (the webhook sets its
    value: the label says the namespace's owner, whatever the Pod was sent with)."""
    return {"own-labels": {"app": "probe"}, "no-labels": None, "owner-set": {"app": "probe", label: OTHER_OWNER}}


TOKEN_VOLUME = re.compile(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}")


def _token_volume_named(spec):
    """The Pod spec with the name of its service-account token volume made the same for every Pod:
    the ServiceAccount admission plugin names it kube-api-access-<5 random characters> for each Pod
    (plugin/pkg/admission/serviceaccount/admission.go, mountServiceAccountToken), so two Pods a
    webhook left alone differ there."""
    if not isinstance(spec, dict):
        return spec
    spec = copy.deepcopy(spec)
    for volume in spec.get("volumes") or []:
        if TOKEN_VOLUME.fullmatch(str(volume.get("name", ""))):
            volume["name"] = "kube-api-access-*"
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            for mount in container.get("volumeMounts") or []:
                if TOKEN_VOLUME.fullmatch(str(mount.get("name", ""))):
                    mount["name"] = "kube-api-access-*"
    return spec


def observe_mutating_webhook(ctx) -> dict:
    lab = _lab(ctx.env)
    admin = _admin(ctx)
    mine = [{**m, "apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration"}
            for m in admin.list(ADMISSION, "mutatingwebhookconfigurations")[0]
            if ("mutatingwebhookconfigurations", m["metadata"]["name"]) not in lab.LAB_WEBHOOKS]
    namespaces = [{"name": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {}}
                  for n in admin.list("v1", "namespaces")[0]]
    probes = {}
    if mine:
        for n in namespaces:
            for case, labels in probe_pods(ctx.params["label"]).items():
                code, body = _probe_pod(admin, n["name"], labels=labels)
                meta = (body.get("metadata") or {}) if code == 201 else {}
                probes[f"{n['name']}/{case}"] = {
                    "code": code, "message": _message(body) if code != 201 else "",
                    "labels": (meta.get("labels") or {}) if code == 201 else None,
                    "rest": {"annotations": meta.get("annotations") or {}, "spec": _token_volume_named(body.get("spec"))}
                    if code == 201 else None}
    if mine:
        probes.update(_later_probes(ctx, admin, mine))
        # the probes above are dry runs (nothing is stored); what the webhooks answer a creation that
        # is stored is asked of them too, as the API server would send it, for every namespace with
        # the label (a webhook that answers dry runs and real creations differently shows here)
        enabled = [n for n in namespaces if n["labels"].get(ctx.params["enabler"]) == "enabled"]
        for n in enabled:
            probes.update({f"{key}/stored": probe for key, probe in
                           _dispatched_probes(ctx, admin, mine, n, dry_run=False).items()})
            # and as the ReplicaSet controller sends it (a Deployment's Pods): the webhook itself
            # may decide by the review's userInfo
            probes.update({f"{key}/controller": probe for key, probe in
                           _dispatched_probes(ctx, admin, mine, n, dry_run=False,
                                              user=_controller("replicaset-controller")).items()})
    lab_changed = [{"name": built["metadata"]["name"], "deleted": live is None, "webhooks": len(built["webhooks"]),
                    "now": len((live or {}).get("webhooks") or [])}
                   for _, built, live in lab._lab_mutating_changed(ctx.env, admin)]
    return {"configurations": mine, "namespaces": namespaces, "probes": probes, "lab_changed": lab_changed}


def _later_probes(ctx, admin, configurations) -> dict:
    """What a Pod created (dry run) in a namespace made later with the label comes back as: the
    student's webhooks called with the AdmissionReview the API server would send, by labkit's own
    mutating dispatcher (pkg/admission/plugin/webhook/mutating/dispatcher.go Dispatch: matching,
    the call, the JSON Patch applied in order), over the live Services and endpoints they may name.
    A namespace that does not exist yet cannot be asked of the live server; its webhooks can."""
    return _dispatched_probes(ctx, admin, configurations, later_namespaces(ctx.params["enabler"])[0], dry_run=True)


def _dispatched_probes(ctx, admin, configurations, later: dict, *, dry_run: bool, user=None) -> dict:
    """What the probe Pods created in the namespace `later` ({name, labels}) come back as from the
    student's mutating webhooks, called by labkit's own dispatcher (see _later_probes), as a dry run
    or as a creation that is stored (nothing is stored either way: the dispatcher only admits)."""
    from labkit.apiserver.admission.webhook import MutatingWebhooks
    from labkit.apiserver.errors import ApiError
    services = [{**o, "apiVersion": "v1", "kind": "Service"} for o in admin.list("v1", "services")[0]]
    slices = [{**o, "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice"}
              for o in admin.list("discovery.k8s.io/v1", "endpointslices")[0]]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": later["name"], "labels": later["labels"]}}
    registry = reconstruct.Registry(reconstruct.Objects([namespace, *configurations, *services, *slices]))
    admin_user = _requester("labkit-admin", ("kubeadm:cluster-admins", "system:authenticated"))
    out = {}
    for case, labels in probe_pods(ctx.params["label"]).items():
        attrs = reconstruct.pod_attributes(later["name"], _pod(labels), dry_run=dry_run)
        attrs.user = user or admin_user
        try:
            MutatingWebhooks(registry).admit(attrs)
        except ApiError as exc:
            out[f"{later['name']}/{case}"] = {"code": exc.code, "message": exc.message, "labels": None, "rest": None}
            continue
        meta = attrs.obj.get("metadata") or {}
        out[f"{later['name']}/{case}"] = {"code": 201, "message": "", "labels": meta.get("labels") or {},
                                          "rest": None}
    return out


# labels Pods commonly carry: `kubectl run` sets run=<name>, workload controllers copy their
# template's (app, tier, the recommended app.kubernetes.io/*) and add pod-template-hash
COMMON_LABELS = {"run": "x", "app": "web", "tier": "frontend", "app.kubernetes.io/name": "web",
                 "pod-template-hash": "5d8f7c9b4"}


def pod_label_space(configurations, own_label: str, own_value: str) -> list[dict | None]:
    """Label sets of Pods to ask a webhook's matching about, so that "every Pod" means every Pod:
    none, the probes', each common label alone, and, for every key the configurations' objectSelectors
    name, the key absent, with each value they name and with another value (an objectSelector
    decides by these keys only, apimachinery labels.Selector). The exercise's own label is there
    with every value but its own: a Pod that already says the right owner needs no call (skipping
    it changes nothing), one that says another must be sent like every other."""
    space: list[dict | None] = [None, *[dict(p) for p in probe_pods(own_label).values() if p]]
    keys: dict[str, set] = {}
    for c in configurations:
        for hook in c.get("webhooks") or []:
            selector = hook.get("objectSelector") or {}
            for k, v in (selector.get("matchLabels") or {}).items():
                keys.setdefault(k, set()).add(str(v))
            for e in selector.get("matchExpressions") or []:
                keys.setdefault(str(e.get("key", "")), set()).update(str(v) for v in e.get("values") or [])
    for k, v in COMMON_LABELS.items():
        keys.setdefault(k, set()).add(v)
    own = keys.pop(own_label, set())
    for k in sorted(keys):
        for v in sorted(keys[k]) + ["other-value"]:
            if {k: v} not in space:
                space.append({k: v})
    for v in sorted(own - {own_value}) + [OTHER_OWNER]:
        if {own_label: v} not in space:
            space.append({own_label: v})
    return space


def later_namespaces(enabler: str) -> list[dict]:
    """Namespaces made after the fix: one labelled `enabler`=enabled, one without the label, one
    with the label set to another value (a selector on the key alone takes that one too)."""
    return [{"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}
            for name, labels in ((f"{LATER_NAMESPACE}-{enabler}", {enabler: "enabled"}), (LATER_NAMESPACE, {}),
                                 (f"{LATER_NAMESPACE}-{enabler}-off", {enabler: "disabled"}))]


def judge_mutating_webhook(ctx, obs) -> object:
    ns, label, value, enabler = (ctx.params[k] for k in ("namespace", "label", "value", "enabler"))
    for changed in obs.get("lab_changed") or []:
        if changed["deleted"]:
            what = "was deleted"
        elif changed["now"] != changed["webhooks"]:
            what = f"now has {changed['now']} webhooks instead of {changed['webhooks']}"
        else:
            what = "was changed"
        raise CheckFailed(f"the lab's MutatingWebhookConfiguration {changed['name']} {what}: it is not yours and stays "
                          "as it was (`labkit reset requests mutating-webhook` restores it) — register your webhook in "
                          "a MutatingWebhookConfiguration of your own")
    if not obs["configurations"]:
        raise CheckFailed("there is no MutatingWebhookConfiguration of yours yet (`kubectl get "
                          "mutatingwebhookconfigurations`)")
    # the exercise is about web with its label: without it, Pods created in web are rightly not
    # labelled, and a pass would say they are
    web = next((n for n in obs["namespaces"] if n["name"] == ns), None)
    if web is None:
        raise NotJudged(f"the namespace {ns} no longer exists: the exercise's webhook acts there, and the check asks "
                        f"it about Pods created in {ns} — a rebuild of the lab (`labkit reset requests`) makes it again")
    if (web["labels"] or {}).get(enabler) != "enabled":
        raise NotJudged(f"the namespace {ns} is no longer labelled {enabler}=enabled: the exercise's webhook acts "
                        f"there, and the check asks it about Pods created in {ns} — put the label back (`kubectl "
                        f"label namespace {ns} {enabler}=enabled --overwrite`; `labkit reset requests "
                        "mutating-webhook` does it too)")
    # the webhooks' scope over the whole story: every namespace, and namespaces made later with the
    # label, without it, and with it set to another value (the server's own matching: selectors,
    # rules, matchConditions)
    later = later_namespaces(enabler)
    namespaces = list(obs["namespaces"]) + later
    registry = reconstruct.Registry(reconstruct.Objects(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"], "labels": n["labels"]}}
         for n in namespaces]))
    admin_user = _requester("labkit-admin", ("kubeadm:cluster-admins", "system:authenticated"))

    def sent(namespace, labels, user=admin_user) -> bool:
        attrs = reconstruct.pod_attributes(namespace, _pod(labels), dry_run=True)
        attrs.user = user
        return any(reconstruct.webhook_called(registry, c["metadata"]["name"], i, h, attrs) != "skipped"
                   for c in obs["configurations"] for i, h in enumerate(c.get("webhooks") or []))
    # the registration asks for Pod creations: no other request of the enabled namespace is sent
    # (the rules, operations and scope of each webhook, judged by the server's own matching)
    cases = probe_pods(label)
    for labels in cases.values():
        for attrs in reconstruct.other_requests(ns, labels):
            attrs.user = admin_user
            if any(reconstruct.webhook_called(registry, c["metadata"]["name"], i, h, attrs) != "skipped"
                   for c in obs["configurations"] for i, h in enumerate(c.get("webhooks") or [])):
                what = f"{attrs.rt.resource}{'/' + attrs.subresource if attrs.subresource else ''}"
                raise CheckFailed(f"your webhook is also asked about {attrs.operation} of {what} in {ns}: it is "
                                  "registered for Pod creations only — look at its rules (apiGroups, resources, "
                                  "operations)")
    # every Pod whoever creates it: a person, a ServiceAccount, the controllers that create a
    # workload's Pods (matchConditions may decide by request.userInfo)
    for n in sorted(namespaces, key=lambda n: (n["name"] != ns, n["name"])):
        on = (n["labels"] or {}).get(enabler) == "enabled"
        for who in _app_requesters(n["name"]):
            # (what differs from the admin's: what every creator sees alike is judged below)
            if any(sent(n["name"], labels, who) != on and sent(n["name"], labels, who) != sent(n["name"], labels)
                   for labels in cases.values()):
                where = (f"a namespace made later {'with' if on else 'without'} the label {enabler}=enabled"
                         if n in later else n["name"])
                raise CheckFailed(f"Pod creations in {where} by {who.name} would {'not ' if on else ''}be sent to your "
                                  f"webhook: every Pod created in a namespace labelled {enabler}=enabled must be, "
                                  "whoever creates it (a Deployment's Pods are created by the ReplicaSet controller), "
                                  "and none elsewhere — look at what its matchConditions decide by")
    space = pod_label_space(obs["configurations"], label, value)
    for n in sorted(namespaces, key=lambda n: (n["name"] != ns, n["name"])):
        name, on = n["name"], (n["labels"] or {}).get(enabler) == "enabled"
        # every Pod of the namespace, whatever its labels (objectSelector, matchConditions): sent there,
        # and only there; a namespace where no Pod is is the namespaceSelector's business, below
        wrong = [labels for labels in space if sent(name, labels) != on]
        if wrong and len(wrong) < len(space):
            shown = ", ".join(f"{k}={v}" for k, v in (wrong[0] or {}).items())
            shown = f"labelled {shown}" if shown else "without labels"
            where = (f"a namespace made later with the label {enabler}=enabled" if n in later else name) if on else \
                (f"a namespace made later without {enabler}=enabled" if n in later else name)
            raise CheckFailed(f"Pod creations in {where} {shown} would {'not ' if on else ''}be sent to your "
                              f"webhook{'' if on else ', though others are not'}: "
                              + (f"every Pod created in a namespace labelled {enabler}=enabled must be, whatever "
                                 "its labels" if on else f"no Pod of a namespace without {enabler}=enabled may be")
                              + " — look at its objectSelector (and matchConditions)")
        if n in later:
            other = (n["labels"] or {}).get(enabler)
            which = f"the label {enabler}=enabled" if on else f"{enabler}={other} (not enabled)" \
                if other is not None else f"no label {enabler}"
            for labels in cases.values():
                if sent(name, labels) != on:
                    raise CheckFailed(f"a namespace made later with {which} would "
                                      f"{'not ' if on else ''}be sent to your webhook: the namespaces it applies to "
                                      f"must be exactly those labelled {enabler}=enabled — look at its "
                                      "namespaceSelector")
            for case, labels in cases.items() if on else ():
                # what the webhook itself answers there (labkit's dispatcher, see _later_probes)
                probe = obs["probes"].get(f"{name}/{case}")
                if probe is None:
                    continue
                own = _described(case, label)
                got = probe["labels"] or {}
                if probe["code"] != 201:
                    raise CheckFailed(f"creating a Pod{own} in a namespace made later with the label {enabler}=enabled "
                                      f"would fail: {probe['code']}: {probe['message']}.{_patch_note(probe['message'])}"
                                      " Your webhook's log: `labkit requests webhook list`")
                if got.get(label) != value or any(got.get(k) != v for k, v in (labels or {}).items() if k != label):
                    raise CheckFailed(f"a Pod created{own} in a namespace made later with the label {enabler}=enabled "
                                      f"would come back without the label {label}: {value} (or without its own): "
                                      "your webhook must label the Pods of every namespace labelled "
                                      f"{enabler}=enabled, not only of {ns} — look at what it decides by",
                                      observed=got)
            continue
        for labels in cases.values():
            if sent(name, labels) != on:
                raise CheckFailed(f"Pod creations in {name} are {'not ' if on else ''}sent to your webhook: the "
                                  f"namespaces it applies to must be exactly those labelled {enabler}=enabled, not "
                                  "every namespace — look at its namespaceSelector (and its rules)")
        if on:
            # mutating/dispatcher.go: a dry run is refused by a webhook without noSideEffects
            unsafe = [h.get("name", "?") for c in obs["configurations"] for h in c.get("webhooks") or []
                      if h.get("sideEffects") not in ("None", "NoneOnDryRun")]
            if unsafe:
                raise CheckFailed(f"a dry run of a Pod creation in {name} is refused: the server will not send a dry "
                                  f"run to a webhook whose sideEffects are not None or NoneOnDryRun ({unsafe[0]})")
        for case, labels in cases.items():
            probe = obs["probes"].get(f"{name}/{case}") or {"code": 0, "message": "not observed", "labels": None}
            own = _described(case, label)
            if probe["code"] != 201:
                msg = probe["message"]
                why = _patch_note(msg)
                if "dry run" in msg or "dryRun" in msg:
                    why = (" The server will not send a dry run to a webhook whose sideEffects are not None or "
                           "NoneOnDryRun.")
                if on:
                    extra = " A Pod may have no metadata.labels at all." if labels is None and not why else ""
                    raise CheckFailed(f"creating a Pod{own} in {name} (a dry run) failed: {probe['code']}: {msg}.{why}"
                                      f"{extra}{_blocked_by_outage(msg)} Your webhook's log: `labkit requests webhook "
                                      "list`")
                raise CheckFailed(f"creating a Pod in {name} failed: {probe['code']}: {msg}.{_blocked_by_outage(msg)} "
                                  f"Your webhook should not be asked about namespaces without {enabler}=enabled")
            got = probe["labels"] or {}
            if on:
                if case == "owner-set" and got.get(label) == OTHER_OWNER:
                    raise CheckFailed(f"a Pod created{own} in {name} came back with {label}: {OTHER_OWNER} still: your "
                                      f"webhook leaves the label as the Pod was sent with it, but the label says the "
                                      f"namespace's owner, whatever the Pod was sent with (see the prompt) — look at "
                                      "what your webhook does when the label is there already", observed=got)
                stored = obs["probes"].get(f"{name}/{case}/stored")
                if got.get(label) != value and stored is not None and stored["code"] == 201 \
                        and (stored["labels"] or {}).get(label) == value:
                    raise CheckFailed(f"a Pod created{own} in {name} as a dry run (`kubectl run --dry-run=server`) "
                                      f"came back without the label {label}: {value}, while a stored one gets it: "
                                      "your webhook answers a dry run differently from the real creation — look at "
                                      "what it does with the review's request.dryRun", observed=got)
                if got.get(label) != value:
                    raise CheckFailed(f"a Pod created{own} in {name} (a dry run) came back without the label "
                                      f"{label}: {value} — "
                                      "`labkit requests explain` on such a request shows what your webhook answered",
                                      observed=got)
                if labels and any(got.get(k) != v for k, v in labels.items() if k != label):
                    raise CheckFailed(f"a Pod created in {name} with its own labels lost them: your patch replaced the "
                                      "Pod's labels instead of adding one", observed=got)
                untouched = [obs["probes"].get(f"{o['name']}/{case}") for o in obs["namespaces"]
                             if (o["labels"] or {}).get(enabler) != "enabled"]
                untouched = next((u for u in untouched if u and u.get("code") == 201), None)
                if untouched is not None and probe.get("rest") != untouched.get("rest"):
                    part = next(k for k in ("annotations", "spec")
                                if (probe.get("rest") or {}).get(k) != (untouched.get("rest") or {}).get(k))
                    raise CheckFailed(f"a Pod created{own} in {name} came back with its {part} changed: your webhook "
                                      "changes more than the labels — add the one label, nothing else")
                extra = sorted(set(got) - set(labels or {}) - {label})
                if extra:
                    raise CheckFailed(f"a Pod created{own} in {name} came back with labels nobody asked for ("
                                      f"{', '.join(extra)}): add the one label, nothing else", observed=got)
                stored = obs["probes"].get(f"{name}/{case}/stored")
                # the stored creation must come back as its dry run did: the exercise's label and the Pod's own,
                # nothing more (only the student's webhooks are asked here, so nothing the lab's pod-defaults
                # adds is expected)
                wanted = {**(labels or {}), label: got.get(label)}
                if stored is not None and (stored["code"] != 201 or (stored["labels"] or {}) != wanted):
                    result = (f"would fail: {stored['code']}: {stored['message']}" if stored["code"] != 201 else
                              "would come back with other labels than its dry run")
                    extra = {"observed": stored["labels"]} if stored["code"] == 201 else {}
                    raise CheckFailed(f"a Pod created{own} in {name} that is not a dry run (it is stored) {result}: "
                                      "your webhook answers a real creation differently from its dry run — look at "
                                      "what it does with the review's request.dryRun", **extra)
                made = obs["probes"].get(f"{name}/{case}/controller")
                if made is not None and (made["code"] != 201 or (made["labels"] or {}) != wanted):
                    result = (f"would fail: {made['code']}: {made['message']}" if made["code"] != 201 else
                              f"would come back without {label}: {value}" if (made["labels"] or {}).get(label) != value
                              else "would come back with other labels than the admin's")
                    extra = {"observed": made["labels"]} if made["code"] == 201 else {}
                    raise CheckFailed(f"a Pod{own} that the ReplicaSet controller creates in {name} (a Deployment's) "
                                      f"{result}: your webhook must answer every Pod creation alike, whoever sends "
                                      "it — look at what it does with the review's request.userInfo", **extra)
            elif got != (labels or {}):
                raise CheckFailed(f"a Pod created in {name} got {'the label ' + label if label in got else 'its labels changed'}"
                                  f" too: your webhook applies to every namespace — a namespaceSelector decides which "
                                  "ones it is asked about", observed=got)
    return ctx.passed(f"Pods created in {ns} get {label}: {value} from your webhook, keeping their labels; other "
                      "namespaces are left alone")


def _described(case: str, label: str) -> str:
    """How feedback names a probe Pod."""
    return {"own-labels": " with its own labels", "no-labels": " without labels",
            "owner-set": f" with its own labels and {label}: {OTHER_OWNER}"}[case]


def check_mutating_webhook(ctx):
    return judge_mutating_webhook(ctx, observe_mutating_webhook(ctx))


# -- image-tag-policy -----------------------------------------------------------------------------

# distribution/reference's grammar (github.com/distribution/reference regexp.go, ReferenceRegexp),
# which the container runtime and kubelet use to parse an image reference
_ALNUM = r"[a-z0-9]+"
_SEP = r"(?:[._]|__|[-]+)"
_PATH = rf"{_ALNUM}(?:{_SEP}{_ALNUM})*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[(?:[a-fA-F0-9:]+)\])"
_NAME = rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH}(?:/{_PATH})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(rf"^({_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?$")

DIGEST = "sha256:" + "4f1c2a9e" * 8
IMAGES = ("nginx", "nginx:1.27", "registry.example.com:5000/app", "registry.example.com:5000/app:v1",
          f"app@{DIGEST}", "library/nginx:1.27-alpine", "localhost:5000/team/app")


def pinned(image: str) -> bool:
    """Whether a reference names a tag or a digest (and so not the implicit :latest)."""
    found = REFERENCE.match(image)
    return bool(found and (found.group(2) or found.group(3)))


HOSTS = ("", "registry.example.com/", "registry.example.com:5000/", "10.0.0.7:5000/")
PATHS = ("nginx", "team/app-web")
TAGS = ("", ":1.27-alpine", ":latest")
DIGESTS = ("", "@" + DIGEST)


def image_corpus() -> list[str]:
    """References of every shape: [host[:port]/]path[:tag][@digest], each part present or not."""
    return [h + p + t + d for h in HOSTS for p in PATHS for t in TAGS for d in DIGESTS]


def _typed(items, kind):
    return [{**o, "apiVersion": ADMISSION, "kind": kind} for o in items]


def observe_image_tag_policy(ctx) -> dict:
    admin = _admin(ctx)
    return {"policies": _typed(admin.list(ADMISSION, "validatingadmissionpolicies")[0], "ValidatingAdmissionPolicy"),
            "bindings": _typed(admin.list(ADMISSION, "validatingadmissionpolicybindings")[0],
                               "ValidatingAdmissionPolicyBinding"),
            "namespaces": [{"name": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {}}
                           for n in admin.list("v1", "namespaces")[0]]}


def namespaces_like(ns: str, namespaces: list[dict]) -> list[dict]:
    """Namespaces created later that are not `ns`: one of any name, ones whose names begin or end
    with `ns`'s, and one with the labels `ns` has besides its name (a selector on a label `ns`
    happens to carry takes every namespace that is given it too)."""
    own = next((n["labels"] for n in namespaces if n["name"] == ns), {})
    shared = {k: v for k, v in (own or {}).items() if k != "kubernetes.io/metadata.name"}
    made = [(LATER_NAMESPACE, {}), (f"{ns}-apps", {}), (f"apps-{ns}", {})]
    if shared:
        made.append((f"{LATER_NAMESPACE}-labelled", shared))
    present = {n["name"] for n in namespaces}
    return [{"name": name, "labels": {**labels, "kubernetes.io/metadata.name": name}}
            for name, labels in made if name not in present]


# what a binding's validationActions did to a request that failed the policy (the trace's outcome)
_ACTED = {"audited": "each failure is written into the audit log", "warned": "each failure is sent back as a warning",
          "rejected": "each failure is refused"}


def _acting_bindings(attrs) -> list[tuple[str, str]]:
    """(binding, outcome) of each ValidatingAdmissionPolicyBinding whose validationActions acted on
    the request, as the dispatcher traced it (staging/src/k8s.io/apiserver/pkg/admission/plugin/
    policy/validating/dispatcher.go, dispatcher.Dispatch: for a failed validation, Deny refuses,
    Warn adds a warning, Audit the validation_failure audit annotation)."""
    out = []
    for step in attrs.trace.steps:
        if step.stage == "validating-admission" and "/" in step.name:
            pair = (step.name.split("/", 1)[1], step.outcome)
            if pair[1] in _ACTED and pair not in out:
                out.append(pair)
    return sorted(out, key=lambda p: list(_ACTED).index(p[1]))


def update_verdict(registry, user, namespace: str, image: str, init: bool = False) -> str:
    """What the policies decide on an update of a running Pod in `namespace` whose container (or
    init container) image, nginx:1.27, is changed to `image` (a Pod's container and init container
    images are mutable: pkg/apis/core/validation ValidatePodUpdate munges spec.containers[*].image
    and spec.initContainers[*].image)."""
    old = _image_pod("nginx:1.27", init)
    old["metadata"]["namespace"] = namespace
    attrs = reconstruct.pod_attributes(namespace, _image_pod(image, init), operation="UPDATE")
    attrs.old = old
    attrs.options = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    attrs.user = user
    return reconstruct.policy_verdict(registry, attrs)


def debug_verdict(registry, user, namespace: str, image: str) -> str:
    """What the policies decide when `kubectl debug` adds an ephemeral container running `image` to a
    running Pod in `namespace`: an UPDATE of the Pod's ephemeralcontainers subresource, whose object
    is the whole Pod with its new ephemeral container and oldObject the stored Pod
    (pkg/registry/core/pod/storage/storage.go EphemeralContainersREST; its kind is Pod)."""
    return reconstruct.policy_verdict(registry, debug_attributes(user, namespace, image))


def debug_attributes(user, namespace: str, image: str):
    old = _image_pod("nginx:1.27", False)
    old["metadata"]["namespace"] = namespace
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": image, "targetContainerName": "app",
                                           "stdin": True, "tty": True}]
    attrs = reconstruct.pod_attributes(namespace, new, operation="UPDATE")
    attrs.old, attrs.subresource, attrs.kind = old, "ephemeralcontainers", ("", "v1", "Pod")
    attrs.options = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    attrs.user = user
    return attrs


LEGACY_CHANGE = "a change of the labels of a Pod whose untagged images it ran before your policy existed"
TAKEN_OVER = ("nginx", "registry.example.com:5000/team/app-web")     # untagged images a Pod already runs


def legacy_pod(namespace: str, image: str) -> dict:
    """A Pod made in `namespace` before the policy: its containers app and init run nginx:1.27, its
    container legacy, init container setup and ephemeral container old-debugger (`kubectl debug`
    before the policy) the untagged `image`."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace, "labels": {"run": "probe"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "legacy", "image": image}],
                     "initContainers": [{"name": "init", "image": "nginx:1.27"}, {"name": "setup", "image": image}],
                     "ephemeralContainers": [{"name": "old-debugger", "image": image, "targetContainerName": "app"}]}}


def taken_over_requests(namespace: str, image: str):
    """(what, admission attributes) of the requests that give a container of a Pod made before the
    policy the untagged `image` other containers of the Pod already run (legacy_pod): its container
    app or init container init changed in place to it (an UPDATE of the Pod, as `kubectl set image`
    sends), and an ephemeral container with it added (an UPDATE of the ephemeralcontainers
    subresource, as `kubectl debug` sends). The container that gets it runs an untagged image it did
    not run before: each is judged as a creation with that image is."""
    old = legacy_pod(namespace, image)
    for field, name, what in (("containers", "app", "container"), ("initContainers", "init", "init container")):
        new = copy.deepcopy(old)
        next(c for c in new["spec"][field] if c["name"] == name)["image"] = image
        attrs = reconstruct.pod_attributes(namespace, new, operation="UPDATE")
        attrs.old, attrs.options = old, {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
        yield f"its {what} {name} changed in place to {image} (as `kubectl set image` sends it)", attrs
    new = copy.deepcopy(old)
    new["spec"]["ephemeralContainers"].append({"name": "debugger", "image": image, "targetContainerName": "app",
                                               "stdin": True, "tty": True})
    attrs = reconstruct.pod_attributes(namespace, new, operation="UPDATE")
    attrs.old, attrs.subresource, attrs.kind = old, "ephemeralcontainers", ("", "v1", "Pod")
    attrs.options = {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}
    yield f"an ephemeral container with {image} added to it (as `kubectl debug` adds it)", attrs


def pod_side_requests(namespace: str):
    """(what, admission attributes) of the requests about a Pod in `namespace` (its images all
    tagged) that carry no new image: the scheduler binding it to a node (a Binding created through
    pods/binding), an eviction (an Eviction through pods/eviction, policy/v1), the kubelet's status
    update, a resize, the Pod's deletion (pkg/registry/core/pod/storage/storage.go; admission sees
    the subresource's own kind and object, none on DELETE); and a change of the labels of a Pod made
    before the policy, whose images have no tag (an UPDATE of the Pod whose images stay as they
    were: `kubectl label`, a controller adopting or releasing it)."""
    from labkit.apiserver.admission import Attributes
    pod = _image_pod("nginx:1.27", True)
    pod["metadata"]["namespace"] = namespace
    rt = reconstruct.pod_attributes(namespace, pod).rt
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "probe", "namespace": namespace},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "probe", "namespace": namespace}}
    status = {**copy.deepcopy(pod), "status": {"phase": "Running"}}
    yield "the scheduler's binding of a Pod to its node (pods/binding)", Attributes(
        "CREATE", rt, namespace, "probe", binding, subresource="binding", kind=("", "v1", "Binding"))
    yield "an eviction (pods/eviction)", Attributes(
        "CREATE", rt, namespace, "probe", eviction, subresource="eviction", kind=("policy", "v1", "Eviction"))
    yield "the kubelet's status update (pods/status)", Attributes(
        "UPDATE", rt, namespace, "probe", status, old=pod, subresource="status")
    yield "a resize (pods/resize)", Attributes("UPDATE", rt, namespace, "probe", copy.deepcopy(pod), old=pod,
                                               subresource="resize")
    yield "the deletion of a Pod", Attributes("DELETE", rt, namespace, "probe", None, old=pod)
    legacy = _image_pod("busybox", True)
    legacy["spec"]["containers"][0]["image"] = "nginx"
    legacy["metadata"]["namespace"] = namespace
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"]["team"] = "web"
    yield LEGACY_CHANGE, Attributes("UPDATE", rt, namespace, "probe", relabelled, old=legacy,
                                    options={"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"})


def _image_pod(image, init):
    spec = {"containers": [{"name": "app", "image": "nginx:1.27" if init else image}]}
    if init:
        spec["initContainers"] = [{"name": "init", "image": image}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "labels": {"run": "probe"}}, "spec": spec}


# how the policy plugin's trace ends a validation that failed to evaluate and was admitted
# (labkit.apiserver.admission.policy, ValidatingPolicies._act)
IGNORED_ERROR = "failurePolicy Ignore admits"


def judge_image_tag_policy(ctx, obs) -> object:
    ns = ctx.params["namespace"]
    if not obs["policies"]:
        raise CheckFailed("there is no ValidatingAdmissionPolicy yet (`kubectl get validatingadmissionpolicies`)")
    names = {p["metadata"]["name"] for p in obs["policies"]}
    bound = [b for b in obs["bindings"] if (b.get("spec") or {}).get("policyName") in names]
    if not bound:
        raise CheckFailed("your ValidatingAdmissionPolicy has no ValidatingAdmissionPolicyBinding: a policy does "
                          "nothing until a binding puts it to work")
    namespaces = list(obs["namespaces"])
    later = namespaces_like(ns, namespaces)
    namespaces += later
    registry = reconstruct.Registry(reconstruct.Objects(
        obs["policies"] + obs["bindings"] +
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"], "labels": n["labels"]}}
         for n in namespaces]))
    admin_user = _requester("labkit-admin", ("kubeadm:cluster-admins", "system:authenticated"))

    ignored = {}     # (image, init) -> why a validation failed to evaluate, admitted under failurePolicy Ignore

    def verdict(namespace, image, init, user=admin_user):
        attrs = reconstruct.pod_attributes(namespace, _image_pod(image, init))
        attrs.user = user
        result = reconstruct.policy_verdict(registry, attrs)
        if namespace == ns:
            for step in attrs.trace.steps:
                if step.stage == "validating-admission" and step.detail.endswith(IGNORED_ERROR):
                    ignored.setdefault((image, init), step.detail.removesuffix(IGNORED_ERROR).rstrip("; "))
        return result, attrs.warnings, _acting_bindings(attrs)
    wrong_admitted, wrong_refused = [], []
    corpus = image_corpus()
    for init in (False, True):
        for image in corpus:
            result, _, _ = verdict(ns, image, init)
            if pinned(image) and result != "admitted":
                wrong_refused.append((image, init, result.removeprefix("denied: ")))
            elif not pinned(image) and result == "admitted":
                wrong_admitted.append((image, init))
    # an expression that fails to evaluate on some Pods (a field read that the Pod may not have)
    # admits them under failurePolicy Ignore, whatever their images: that, not the image test, is
    # then what let them in
    unevaluated = [(image, init) for image, init in wrong_admitted if (image, init) in ignored]
    if unevaluated:
        image, init = min(unevaluated, key=lambda u: (":" in u[0], len(u[0])))
        where = "an init container's image" if init else "the image"
        raise CheckFailed(f"a Pod in {ns} with {where} {image} was admitted{_more(unevaluated)}: your policy's "
                          f"{ignored[image, init]}, and its failurePolicy Ignore admits what it cannot evaluate — "
                          "look at what your expressions read that a Pod may not have, and at the policy's "
                          "failurePolicy")
    unpinned = sum(not pinned(i) for i in corpus) * 2
    if wrong_admitted and len(wrong_admitted) == unpinned:
        actions = sorted({a for b in bound for a in (b.get("spec") or {}).get("validationActions") or []})
        if "Deny" not in actions:
            raise CheckFailed(f"every image without a tag was admitted: your binding's validationActions are "
                              f"{', '.join(actions) or 'none'} — they report a failure (Warn, Audit) but do not deny")
        raise CheckFailed(f"every Pod in {ns} with an image without a tag was admitted: look at what your policy and its "
                          "binding match (matchConstraints, matchResources) and at the expressions")
    if wrong_admitted:
        if all(init for _, init in wrong_admitted):
            image = wrong_admitted[0][0]
            raise CheckFailed(f"a Pod whose init container uses an image without a tag ({image}) was admitted: init "
                              "containers run images too — look at spec.initContainers")
        shown = sorted({i for i, _ in wrong_admitted}, key=lambda i: (":" not in i, len(i)))
        note = ""
        if all(":" in i.split("@")[0] for i in shown):     # only references with a port got in
            note = (" (a colon can belong to a registry's port: the tag is what follows a colon after the last `/`)")
        raise CheckFailed(f"Pods with images that name no tag or digest were admitted, as {shown[0]}"
                          f"{_more(shown)}{note}")
    if wrong_refused:
        image, init, msg = wrong_refused[0]
        where = "an init container's" if init else "the"
        raise CheckFailed(f"a Pod with {where} image {image} was refused although it names a tag or a digest ({msg})"
                          f"{_more(wrong_refused)}")
    # the rule holds whoever creates the Pod: a person, the namespace's ServiceAccount, and the
    # controllers that create a workload's Pods (a Deployment's Pods are the ReplicaSet
    # controller's requests), not only the admin the corpus above is asked as
    for who in _app_requesters(ns):
        for image, init in (("nginx", False), ("nginx", True), ("nginx:1.27", False)):
            attrs = reconstruct.pod_attributes(ns, _image_pod(image, init))
            attrs.user = who
            if (reconstruct.policy_verdict(registry, attrs) == "admitted") != pinned(image):
                what = "admitted" if not pinned(image) else "refused"
                where = "an init container's image" if init else "the image"
                raise CheckFailed(f"a Pod created in {ns} by {who.name} with {where} {image} was {what}: the rule "
                                  "holds whoever creates the Pod — a person, a ServiceAccount, or the controller that "
                                  "creates a workload's Pods (a Deployment's are created by the ReplicaSet "
                                  "controller) — look at what your policy's matchConditions (and the binding's "
                                  "matchResources) decide by")
    # a Pod's container and init container images may be changed in place (an UPDATE: `kubectl set
    # image`): the Pod then runs the new image, so it is judged as a creation is
    for init in (False, True):
        updated = [image for image in corpus
                   if (update_verdict(registry, admin_user, ns, image, init) == "admitted") != pinned(image)]
        if updated:
            image = updated[0]
            which = "an init container's image" if init else "the image"
            raise CheckFailed(f"a Pod in {ns} had {which} changed in place (an UPDATE, as `kubectl set image` sends) "
                              f"to {image}, and that was {'admitted' if not pinned(image) else 'refused'}: the Pod then "
                              "runs that image — look at the operations your policy matches (matchConstraints)"
                              f"{' and at what it judges on an update' if init else ''}")
    # `kubectl debug` adds an ephemeral container to a running Pod: it runs that image too
    debugged = [image for image in corpus if (debug_verdict(registry, admin_user, ns, image) == "admitted") != pinned(image)]
    if debugged:
        image = debugged[0]
        if pinned(image):
            raise CheckFailed(f"adding an ephemeral container with the image {image} to a running Pod in {ns} (as "
                              "`kubectl debug` does) was refused although it names a tag or a digest"
                              f"{_more(debugged)}")
        attrs = debug_attributes(admin_user, ns, image)
        reconstruct.policy_verdict(registry, attrs)
        asked = any(step.stage == "validating-admission" and "/" in step.name for step in attrs.trace.steps)
        where = ("your policy is asked about it, but its expressions do not judge spec.ephemeralContainers" if asked
                 else "`kubectl debug` sends an UPDATE of the Pod's ephemeralcontainers subresource, which your policy "
                      "is not asked about — look at the resources it matches (matchConstraints)")
        raise CheckFailed(f"an ephemeral container with the image {image} was added to a running Pod in {ns} (as "
                          f"`kubectl debug --image={image}` adds it): the Pod then runs that image. {where}")
    # an image changed in place or a debug container added by someone else than the admin (a
    # person, a ServiceAccount, a controller) is judged by the same rule
    for who in _app_requesters(ns):
        for what, result in (("had the image of a container changed in place (as `kubectl set image` sends) to nginx",
                              update_verdict(registry, who, ns, "nginx")),
                             ("had an ephemeral container with the image nginx added (as `kubectl debug` adds it)",
                              debug_verdict(registry, who, ns, "nginx"))):
            if result == "admitted":
                raise CheckFailed(f"a Pod in {ns} {what} by {who.name}, and that was admitted: the rule holds whoever "
                                  "sends the request — look at what your policy's matchConditions (and the "
                                  "binding's matchResources) decide by")
    # a Pod made before the policy may run an untagged image already: a container given that image
    # later runs it anew, whatever the Pod's other containers run
    for image in TAKEN_OVER:
        for what, attrs in taken_over_requests(ns, image):
            attrs.user = admin_user
            if reconstruct.policy_verdict(registry, attrs) == "admitted":
                raise CheckFailed(f"a Pod in {ns} made before your policy already runs the untagged image {image} in "
                                  f"other containers; {what} was admitted, and that container then runs an image "
                                  "without a tag — an image is new to the container it is given to, whatever the "
                                  "Pod's other containers run: look at how your expressions compare a container "
                                  "with oldObject")
    for what, attrs in pod_side_requests(ns):
        attrs.user = admin_user
        result = reconstruct.policy_verdict(registry, attrs)
        if result != "admitted" and what == LEGACY_CHANGE:
            raise CheckFailed(f"your policy refuses {what} in {ns} ({result.removeprefix('denied: ')}): requests "
                              "that bring no new image must go through — on an update, look at what your expressions "
                              "judge: an image the Pod already had is not new (the operations matchConstraints sends "
                              "them are right)")
        if result != "admitted":
            raise CheckFailed(f"your policy refuses {what} in {ns} ({result.removeprefix('denied: ')}): requests "
                              "that bring no new image must go through — look at the resources and operations your "
                              "policy matches (matchConstraints)")
    for n in namespaces:
        other = n["name"]
        if other == ns:
            continue
        # (the admin's Pods with both kinds of untagged reference, and everyone else's too)
        asked = [(image, admin_user) for image in ("nginx", "registry.example.com:5000/app")] + \
            [("nginx", who) for who in _app_requesters(other)]
        for image, who in asked:
            result, warnings, acting = verdict(other, image, False, who)
            if result != "admitted" or warnings or acting:
                where = other
                if n in later:
                    shown = ", ".join(f"{k}={v}" for k, v in sorted(n["labels"].items())
                                      if k != "kubernetes.io/metadata.name")
                    where = f"a namespace created later ({other}{', labelled ' + shown if shown else ''})"
                if result != "admitted" or warnings:
                    what = "refused" if result != "admitted" else "warned about"
                    by = "" if who is admin_user else f" by {who.name}"
                    raise CheckFailed(f"a Pod created in {where}{by} was {what} by your policy: it must apply to {ns} only — "
                                      "look at the binding's matchResources (and the policy's matchConstraints)")
                binding, outcome = acting[0]
                raise CheckFailed(f"your binding {binding!r} puts the policy to work on Pods created in {where} too "
                                  f"({outcome}: {_ACTED[outcome]}): the exercise asks for a policy in {ns} only — "
                                  "look at that binding's matchResources")
    return ctx.passed(f"your policy refuses exactly the images without tag or digest in {ns} — in containers, init "
                      "containers and the ephemeral containers of `kubectl debug`, on creation and on update — and "
                      "leaves the other namespaces alone")


def check_image_tag_policy(ctx):
    return judge_image_tag_policy(ctx, observe_image_tag_policy(ctx))


# -- outage ---------------------------------------------------------------------------------------

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
LATER_NAMESPACE = "team-later"          # a namespace created after the fix: the story goes on
SCOPE_FIELDS = ("namespaceSelector", "objectSelector", "matchConditions", "failurePolicy")
HOOK_DEFAULTS = {"namespaceSelector": {}, "objectSelector": {}, "matchConditions": [], "matchPolicy": "Equivalent",
                 "failurePolicy": "Fail", "timeoutSeconds": 10}


def _normal_hook(hook: dict, mutating: bool) -> dict:
    """A webhook with the server's defaults filled in (admissionregistration/v1 defaults.go:
    SetDefaults_ValidatingWebhook / SetDefaults_MutatingWebhook, SetDefaults_Rule scope *)."""
    out = {**HOOK_DEFAULTS, **({"reinvocationPolicy": "Never"} if mutating else {}), **hook}
    out["rules"] = [{"scope": "*", **r} for r in hook.get("rules") or []]
    return out


def observe_outage(ctx) -> dict:
    lab = _lab(ctx.env)
    admin = _admin(ctx)
    events = lab.target(ctx.env).audit(since=ctx.ready_time) or []
    # the outage is a Pod creation that pod-policy's webhook could not be called for: 500 `failed
    # calling webhook "NAME": ...` (apiserver/pkg/util/webhook/error.go ErrCallingWebhook.Error, as
    # validating/dispatcher.go Dispatch returns it under failurePolicy Fail). Another 500 — a
    # webhook of the student's own that fails, or a JSON Patch that does not apply, also in the
    # dry runs of other exercises' checks — is not this outage
    hooks = [h["name"] for resource, built in lab.webhook_configurations(ctx.env)
             if resource == "validatingwebhookconfigurations" and built["metadata"]["name"] == ctx.params["webhook"]
             for h in built["webhooks"]]
    calls = tuple(f'failed calling webhook "{name}"' for name in hooks)
    met = any((e.get("objectRef") or {}).get("resource") == "pods" and e.get("verb") == "create"
              and (e.get("responseStatus") or {}).get("code") == 500
              and any(call in ((e.get("responseStatus") or {}).get("message") or "") for call in calls)
              for e in events)
    configs = {resource: admin.list(ADMISSION, resource)[0]
               for resource in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")}
    deployment = admin.get_or_none("apps/v1", "deployments", ctx.params["deployment"], ctx.params["namespace"]) or {}
    template = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    return {"met": met, "configs": configs,
            "namespaces": [{"name": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {}}
                           for n in admin.list("v1", "namespaces")[0]],
            "backend_labels": template.get("labels") or {"app": ctx.params["deployment"]},
            "service": (admin.get_or_none("v1", "services", ctx.params["deployment"], ctx.params["namespace"])
                        or {}).get("spec"),
            "backend_ready": lab.backend_ready(admin)}


def _pod(labels, privileged=False, init=False):
    container = {"name": "app", "image": "nginx:1.27"}
    if privileged:
        container["securityContext"] = {"privileged": True}
    meta = {"name": "probe", **({"labels": labels} if labels is not None else {})}
    spec = {"containers": [{"name": "app", "image": "nginx:1.27"}], "initContainers": [container]} if init \
        else {"containers": [container]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _requester(name, groups):
    from labkit.apiserver.request import User
    return User(name, list(groups))


def _service_account(namespace, name):
    """A ServiceAccount's user (serviceaccount.UserInfo: its name and the groups of every
    ServiceAccount and of its namespace's)."""
    return _requester(f"system:serviceaccount:{namespace}:{name}",
                      ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


def _controller(name):
    """A kube-controller-manager controller as the API server sees it (kubeadm runs it with
    --use-service-account-credentials: each controller its own ServiceAccount in kube-system,
    cmd/kube-controller-manager/app/controllermanager.go)."""
    return _service_account("kube-system", name)


# who creates Pods in an application namespace besides the admin: a person of the team, the
# namespace's own ServiceAccount (an operator, a CI job), and the controllers that make Pods from
# workloads (pkg/controller/replicaset, job, statefulset, daemon: the names of
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go)
POD_CONTROLLERS = ("replicaset-controller", "job-controller", "statefulset-controller", "daemon-set-controller")


def _app_requesters(namespace):
    return (_requester("bob", ("shop-team", "system:authenticated")), _service_account(namespace, "default"),
            *(_controller(c) for c in POD_CONTROLLERS))


def outage_fates(ctx, obs, config):
    """(requirement, namespace, Pod labels, requester, outcome) over the whole story, in the order
    the requirements are judged: "backend" (its own Pod while it is down), "system" (the cluster's
    own namespaces while it is down: any Pod, from the admin or a controller), "app" (a privileged
    Pod, in a container or an init container, in every other namespace and one made later, while
    it is up, whoever creates it: the admin, a person, the namespace's ServiceAccount, the
    controllers of workloads), "app-down" (the same while it is down). The requester is None for
    the admin. Outcomes: admitted | refused (by the backend) | blocked (the webhook cannot be
    called and fails closed, or its matchConditions fail to evaluate), from the server's own
    matching."""
    webhook, home = ctx.params["webhook"], ctx.params["namespace"]
    namespaces = list(obs["namespaces"])
    # namespaces made later: one of any name, and ones whose names begin or end like the cluster's
    # own or the backend's (a scope by prefix or suffix leaves those out too, and they are
    # application namespaces)
    later = [LATER_NAMESPACE] + [n for s in (*SYSTEM_NAMESPACES, home) for n in (f"{s}-apps", f"apps-{s}")]
    for name in later:
        if not any(n["name"] == name for n in namespaces):
            namespaces.append({"name": name, "labels": {"kubernetes.io/metadata.name": name}})
    registry = reconstruct.Registry(reconstruct.Objects(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n["name"], "labels": n["labels"]}}
         for n in namespaces]))
    admin_user = _requester("labkit-admin", ("kubeadm:cluster-admins", "system:authenticated"))
    controller = _controller("replicaset-controller")
    label_sets = (None, {"run": "probe"}, dict(obs["backend_labels"]))

    def fate(ns, pod, user, backend_up):
        # apiserver/pkg/admission/plugin/webhook/validating/dispatcher.go Dispatch: a webhook that is
        # not called lets the request by; a call that fails (no endpoints while the backend is down)
        # is ignored under failurePolicy Ignore and refuses the request under Fail; matchConditions
        # that fail to evaluate under Fail refuse it too (generic/webhook.go ShouldCallHook)
        attrs = reconstruct.pod_attributes(ns, pod)
        attrs.user = user
        hooks = config.get("webhooks") or []
        out = "admitted"
        for i, hook in enumerate(hooks):
            verdict = reconstruct.webhook_called(registry, webhook, i, hook, attrs)
            if verdict.startswith("error"):
                return "blocked"
            if verdict == "called":
                if not backend_up:
                    if (hook.get("failurePolicy") or "Fail") == "Fail":
                        return "blocked"
                elif _privileged(pod):
                    out = "refused"
        return out

    yield "backend", home, dict(obs["backend_labels"]), controller, \
        fate(home, _pod(dict(obs["backend_labels"])), controller, False)
    for ns in SYSTEM_NAMESPACES:
        for labels in label_sets:
            for user in (admin_user, controller):
                yield "system", ns, labels, None if user is admin_user else user, fate(ns, _pod(labels), user, False)
    for n in namespaces:
        ns = n["name"]
        if ns in SYSTEM_NAMESPACES or ns == home:
            continue
        for labels in label_sets:
            for init in (False, True):
                yield "app", ns, labels, None, fate(ns, _pod(labels, privileged=True, init=init), admin_user, True)
        # whoever creates the Pod: a person, the namespace's own ServiceAccount, or a controller
        # making it from a Deployment, Job, StatefulSet or DaemonSet (most application Pods)
        for user in _app_requesters(ns):
            for labels in label_sets:
                yield "app", ns, labels, user, fate(ns, _pod(labels, privileged=True), user, True)
        # while the backend is down the policy is still in force there: nothing gets through unchecked
        for user in (None, *_app_requesters(ns)):
            yield "app-down", ns, None, user, fate(ns, _pod(None, privileged=True), user or admin_user, False)


def judge_outage(ctx, obs) -> object:
    webhook, app, home = ctx.params["webhook"], ctx.params["app"], ctx.params["namespace"]
    lab = _lab(ctx.env)
    if not obs["met"]:
        raise CheckFailed("you have not met the outage yet: take the backend down as the prompt says and try to "
                          "create a Pod")
    present = {(r, c["metadata"]["name"]): c for r, items in obs["configs"].items() for c in items}
    missing = [f"{r.rstrip('s')} {n}" for r, n in sorted(lab.LAB_WEBHOOKS) if (r, n) not in present]
    if missing:
        raise CheckFailed(f"the webhook configurations {', '.join(missing)} were deleted: that turns a policy off for "
                          "everyone (and others' webhooks with it) — fix the one that blocks, and keep it")
    for resource, built in lab.webhook_configurations(ctx.env):
        live = present[(resource, built["metadata"]["name"])]
        mutating = resource.startswith("mutating")
        mine = resource == "validatingwebhookconfigurations" and built["metadata"]["name"] == webhook
        want, have = built.get("webhooks") or [], live.get("webhooks") or []
        if len(want) != len(have):
            raise CheckFailed(f"the {resource.rstrip('s')} {built['metadata']['name']} now has {len(have)} webhooks "
                              f"instead of {len(want)}: change which requests the webhook is sent, nothing else")
        for w, h in zip(want, have):
            w, h = _normal_hook(w, mutating), _normal_hook(h, mutating)
            changed = sorted(k for k in set(w) | set(h) if w.get(k) != h.get(k) and not (mine and k in SCOPE_FIELDS))
            if changed:
                whose = "" if mine else " — it is not the webhook that blocks: nobody else's webhook may suffer"
                raise CheckFailed(f"the {resource.rstrip('s')} {built['metadata']['name']} has its {', '.join(changed)} "
                                  f"changed{whose}. Of {webhook}, change only which requests it is sent "
                                  "(selectors, matchConditions) or its failurePolicy")
    service = obs["service"] or {}
    ports = [(p.get("port"), p.get("targetPort", p.get("port"))) for p in service.get("ports") or []]
    if service.get("selector") != lab.BACKEND_SELECTOR or ports != [(443, "https")]:
        raise CheckFailed(f"the Service {home}/{ctx.params['deployment']} the webhook calls was "
                          f"{'deleted' if not service else 'changed'}: with its backend back, Pod creations would "
                          "still fail — the Service must lead to the backend's Pods as it did")
    config = present[("validatingwebhookconfigurations", webhook)]
    for requirement, ns, labels, user, outcome in outage_fates(ctx, obs, config):
        if requirement == "backend" and outcome == "blocked":
            raise CheckFailed(f"the webhook {webhook} still fails closed for the Pods of its own backend in {home}: "
                              "while the backend is down, its new Pod is refused by the very webhook it serves, so "
                              "it can never come back. Look at which namespaces it is still sent")
        if requirement == "system" and outcome == "blocked":
            raise CheckFailed(f"Pod creations in {ns} still fail while the backend of the webhook {webhook} is down: "
                              "the cluster's own namespaces must never be blocked by it")
        if requirement == "app" and outcome != "refused":
            where = f"a namespace created later ({ns})" if ns not in {n["name"] for n in obs["namespaces"]} else ns
            shown = f" ({', '.join(f'{k}={v}' for k, v in labels.items())})" if labels else ""
            by = f" that {user.name} creates" if user is not None else ""
            raise CheckFailed(f"the webhook {webhook} no longer applies to some Pods{by} in {where}{shown}: a "
                              "privileged Pod gets through while its backend is up. The policy must stay in force for "
                              "the application namespaces, whoever creates the Pod — narrow its scope to leave out "
                              "the cluster's own, do not switch it off")
        if requirement == "app-down" and outcome == "admitted":
            where = "a namespace created later" if ns not in {n["name"] for n in obs["namespaces"]} else ns
            by = f" that {user.name} creates" if user is not None else ""
            raise CheckFailed(f"while its backend is down, the webhook {webhook} lets a privileged Pod{by} in {where} "
                              "through unchecked: the policy must stay in force for the application namespaces, "
                              "down or not — look at its failurePolicy")
    how = "its backend is back" if obs["backend_ready"] else f"Pods in {app} wait for its backend (failing closed)"
    return ctx.passed(f"the webhook {webhook} still checks {app} and the other application namespaces, never blocks "
                      f"the cluster's own namespaces or its backend, and {how}")


_BACKEND = []


def _privileged(pod) -> bool:
    """What the backend refuses (policy_backend.py's own rule)."""
    if not _BACKEND:
        from importlib import util
        from pathlib import Path
        spec = util.spec_from_file_location("policy_backend", Path(__file__).with_name("policy_backend.py"))
        module = util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _BACKEND.append(module)
    return bool(_BACKEND[0].privileged(pod))


def check_outage(ctx):
    return judge_outage(ctx, observe_outage(ctx))


# -- audit ----------------------------------------------------------------------------------------

def _ref(e):
    """The event's objectRef; for a create, the name comes from the object sent when the objectRef
    has none (upstream's audit.LogRequestObject completes the objectRef from the request object)."""
    ref = dict(e.get("objectRef") or {})
    if not ref.get("name"):
        ref["name"] = ((e.get("requestObject") or {}).get("metadata") or {}).get("name", "")
    return ref


def check_audit(ctx):
    ns, name = ctx.params["namespace"], ctx.params["configmap"]
    user = ctx.answer_field(ctx.answer(), "user", str).strip()
    events = _lab(ctx.env).target(ctx.env).audit() or []
    # since the lab last set the scene: this ConfigMap's life, not an earlier one's of the same name
    since = _lab(ctx.env).audit_scene_start(ctx.env)
    about = [e for e in events if _ref(e).get("resource") == "configmaps" and _ref(e).get("name") == name
             and received_at(e) >= since]
    deletes = [e for e in about if _ref(e).get("namespace") == ns and e.get("verb") == "delete"
               and (e.get("responseStatus") or {}).get("code", 0) < 300]
    if not deletes:
        return ctx.error(f"the audit log holds no deletion of configmap {ns}/{name}: `labkit reset requests audit` "
                         "builds the exercise again")
    # the deletion the exercise's story tells of is the first since the scene was set: a later one
    # (the ConfigMap made again and deleted, by you or anyone) changes the situation, not the answer
    truth = (deletes[0].get("user") or {}).get("username", "")
    story = _lab(ctx.env).audit_story(ctx.env)
    if story.get("deleter") and story["deleter"] != truth:
        # the audit log is evidence, and the lab knows what it did: the two must agree
        raise CheckFailed("the audit log does not say what the lab did when it set the scene: it was changed after "
                          "the API server wrote it, and an edited log is no evidence. `labkit reset requests audit` "
                          "sets the scene again", observed=user)
    later = {(e.get("user") or {}).get("username", "") for e in deletes[1:]}
    changed = (f" (the ConfigMap was deleted again later, by {len(later)} user{'s' if len(later) > 1 else ''}: the "
               "exercise asks about the deletion of the lab's story, the first one)") if later else ""
    if user == truth:
        return ctx.passed(f"{user} deleted configmap {ns}/{name}{changed}")
    if user in later:
        raise CheckFailed(f"{user} deleted configmap {ns}/{name} after the lab's story had it deleted: the exercise "
                          "asks who deleted the ConfigMap it describes — the first deletion since the lab set the "
                          "scene", observed=user, right_answer=truth)
    # what the named person did instead is not said: it would let trying names stand in for reading
    # the log (only the mistake the exercise is about, the other namespace, is named)
    elsewhere = [e for e in deletes_anywhere(about, ns) if (e.get("user") or {}).get("username") == user]
    users = {(e.get("user") or {}).get("username", "") for e in events}
    # the scenes the lab set before this one (`labkit reset requests audit` sets it again and draws
    # anew who does what): the log keeps their events, and what was done there is not this scene's
    earlier = [e for e in events if _ref(e).get("resource") == "configmaps" and _ref(e).get("name") == name
               and received_at(e) < since]
    at = datetime.datetime.fromtimestamp(since, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    scenes = (f" The log also holds the events of a scene the lab set before {at} (a reset of the exercise sets it "
              "again and draws anew who does what): the exercise asks about the one since then") if earlier else ""
    if elsewhere:
        said = f"{user} deleted a configmap {name} in another namespace, not the one in {ns}: look at objectRef.namespace"
    elif user not in users and any(u.lower() == user.lower() for u in users):
        # a name the log has in another case: said whoever that user is, so it tells nothing of
        # who deleted the ConfigMap (the API server compares user names as they are)
        said = (f"{user} did not delete configmap {ns}/{name}: the audit log names no user {user}, and user names "
                "are case-sensitive — write the name exactly as the event's user.username has it")
    elif user not in users and any(user in ((e.get("user") or {}).get("groups") or []) for e in events):
        # a group of the log: said of any group, so it tells nothing of who deleted the ConfigMap
        said = (f"{user} is a group in the audit log (user.groups), not a user: the answer is the user.username of "
                "the request")
    else:
        said = f"{user} did not delete configmap {ns}/{name}"
    raise CheckFailed(f"{said}. Look for the event whose verb is delete and whose objectRef is that ConfigMap, and read "
                      f"who sent it{changed}{'.' if scenes else ''}{scenes}", observed=user, right_answer=truth)


def deletes_anywhere(events, but_not: str) -> list:
    """Successful deletions among `events` outside namespace `but_not`."""
    return [e for e in events if _ref(e).get("namespace") != but_not and e.get("verb") == "delete"
            and (e.get("responseStatus") or {}).get("code", 0) < 300]
