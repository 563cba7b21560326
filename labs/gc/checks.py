"""Checks of the gc lab. What the student did comes from live objects and the API server's audit
log (how they deleted: which verb, which propagationPolicy; what else they changed by hand); what
the lab was built as from lab.py's built.json (each part's Pods by UID, the Secret's owner
reference, the Pod that holds a finalizer). Answers about what the garbage collector does (the
order of a background deletion, the finalizer and last kind of a foreground one, the fate of the
predict experiment's objects) are judged against labkit's reconstruction of the situation the
exercise describes, played on a server of its own (labkit.gc.reconstruct). What the exercises
leave to the garbage collector must have been done by it: a student who deleted or scaled away
the dependents of a background deletion, or changed the Pods of a stuck one beyond the finalizer
that holds them, is told so and earns nothing; a prediction written after its experiment was
tried by hand in the lab's cluster is not judged. On a real cluster (`labkit run gc
--kubeconfig`) there is no audit log: those checks say so and judge the final state only.

Each check that reads live state is `judge_<name>(ctx, observe_<name>(ctx))`: the observation is
plain data, and the judge a pure verdict on it (the mutant run judges mutated observations).

Checks return within about 2 s: they judge what is there, waiting only briefly for what is
visibly on its way (a Pod in its grace period), and otherwise say "check again in a few seconds".
Audit events and GC decisions count from when the exercise's part was last built (`labkit run`,
`labkit reset gc EXERCISE`). Feedback on answers names the part that is wrong and where to look;
the right answer goes only into `right_answer` (withheld from students)."""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from pathlib import Path


from labkit.exercises import LIVE, AnswerMalformed, CheckFailed, NotJudged, settle, wait_for
from labkit.apiserver.target import for_env
from labkit.errors import LabkitError
from labkit.gc import reconstruct
from labkit.state import write_json_atomic

KINDS = {"deployments": "Deployment", "replicasets": "ReplicaSet", "pods": "Pod"}
GC_FINALIZERS = ("orphan", "foregroundDeletion")
NO_LOG = ("on a real cluster labkit has no audit log or GC decision log, so {what} could not be checked; "
          "judged by the final state only")
BRIEF = 1.5         # seconds a check waits for what is on its way before it says "check again"


# -- helpers ---------------------------------------------------------------------------------------

def _since_ready(ctx, target) -> list[dict] | None:
    """Audit events received after the exercise's part was built (None on a real cluster)."""
    return target.audit(since=ctx.ready_time)


def _students(events: list[dict]) -> list[dict]:
    """Requests of people (kubectl, clients): every user but the cluster's own components."""
    return [e for e in events if not e.get("user", {}).get("username", "").startswith("system:")]


def _ok(e: dict) -> bool:
    return e.get("responseStatus", {}).get("code", 500) < 300


def _on(e: dict, resource: str, name: str | None = None, prefix: str | None = None, subresource: bool = False) -> bool:
    ref = e.get("objectRef") or {}
    if ref.get("resource") != resource or (ref.get("subresource") and not subresource):
        return False
    got = ref.get("name") or ""
    return got == name if name is not None else got.startswith(prefix or "")


def _policy(e: dict) -> str:
    """The propagation policy a DELETE asked for: DeleteOptions in the body, or query parameters."""
    options = e.get("requestObject") if isinstance(e.get("requestObject"), dict) else {}
    query = dict(p.split("=", 1) for p in e.get("requestURI", "").partition("?")[2].split("&") if "=" in p)
    policy = options.get("propagationPolicy") or query.get("propagationPolicy")
    orphan = options.get("orphanDependents", query.get("orphanDependents"))
    if policy:
        return policy
    if orphan in (True, "true"):
        return "Orphan"
    if orphan in (False, "false"):
        return "Background"
    return "default"


def _gone(probe, timeout: float = BRIEF):
    """Wait briefly for what `probe` lists to be empty (Pods take their grace period to go)."""
    return [] if wait_for(lambda: not probe(), timeout=timeout, interval=0.1) else probe()


def _held(obj: dict) -> list[str]:
    """Finalizers that are not the garbage collector's: only whoever added them removes them."""
    return [f for f in obj["metadata"].get("finalizers") or [] if f not in GC_FINALIZERS]


def _controller_ref(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def _chain(client, ns: str, app: str) -> list[dict]:
    """The ReplicaSets and Pods labelled app=<app> that still exist."""
    out = []
    for api_version, resource, kind in (("apps/v1", "replicasets", "ReplicaSet"), ("v1", "pods", "Pod")):
        for obj in client.list(api_version, resource, ns, label_selector=f"app={app}")[0]:
            obj.setdefault("kind", kind)
            out.append(obj)
    return out


# -- (a) owner chain -------------------------------------------------------------------------------

# a Pod's name is a DNS subdomain (apimachinery validation.IsDNS1123Subdomain, as ValidatePodName)
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _object_name(ctx, value: str, key: str, kind: str, ns: str) -> str:
    """A name from the answer, checked before it goes into a URL: a clear message for what cannot
    be an object's name (`shop/web-…`, `pod/web-…`, spaces)."""
    if "/" in value:
        raise CheckFailed(f"{key}: write the {kind}'s name alone, without a namespace or kind in front of it "
                          f"({value.split('/')[0]}/): as `kubectl get {kind.lower()}s -n {ns}` lists it",
                          expected=f"a {kind} name", observed=value)
    if len(value) > 253 or not _NAME.fullmatch(value):
        raise CheckFailed(f"{key}: {value!r} cannot be the name of a {kind} (lower-case letters, digits, '-' and '.'): "
                          f"copy it from `kubectl get {kind.lower()}s -n {ns}`", expected=f"a {kind} name",
                          observed=value)
    return value


def observe_owner_chain(ctx):
    """The student's requests that changed the chain of the Deployment (its ReplicaSets, its
    Pods: scale, label, patch, delete) since the part was built; None on a real cluster."""
    p = ctx.params
    events = _since_ready(ctx, for_env(ctx.env))
    return {"writes": None if events is None else
            [f"{w['verb']} {w['kind']} {w['name']}" for w in _chain_writes(events, p["namespace"], p["deployment"])]
            + _joined_chain(events, p["namespace"], p["deployment"])}


def _joined_chain(events, ns: str, app: str) -> list[str]:
    """The student's objects made to join the chain of `app` under a name of their own (a create
    whose ownerReferences name one of its objects, or whose labels say app=<app>, so that its
    ReplicaSet selects it), and every later write of theirs to them: ['create Pod NAME', ...]."""
    out, joined = [], set()
    for e in _students(events):
        ref = e.get("objectRef") or {}
        if not _ok(e) or ref.get("namespace") != ns or ref.get("resource") not in KINDS or ref.get("subresource"):
            continue
        name = ref.get("name") or ""
        if name == app or name.startswith(app + "-"):
            continue            # the chain's own objects: _chain_writes has them
        body = e.get("requestObject") if isinstance(e.get("requestObject"), dict) else {}
        meta = body.get("metadata") or {}
        if e.get("verb") == "create":
            owners = [str(o.get("name", "")) for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
            if any(o == app or o.startswith(app + "-") for o in owners) or (meta.get("labels") or {}).get("app") == app:
                name = name or meta.get("name") or ""
                joined.add((ref["resource"], name))
                out.append(f"create {KINDS[ref['resource']]} {name}")
        elif (ref["resource"], name) in joined and e.get("verb") in ("update", "patch", "delete"):
            out.append(f"{e['verb']} {KINDS[ref['resource']]} {name}")
    return out


def check_owner_chain(ctx):
    return judge_owner_chain(ctx, observe_owner_chain(ctx))


def _chain_answer_right(ctx, pod_name: str, rs_uid: str, dep_uid: str) -> bool:
    """Whether the answer reads the live chain of a Pod of the Deployment right (nothing said)."""
    p = ctx.params
    try:
        client = for_env(ctx.env).client()
    except LabkitError:     # the lab's server is down: the check says so on its own
        return False
    pod = client.get_or_none("v1", "pods", pod_name, p["namespace"])
    rs_ref = _controller_ref(pod) if pod else None
    rs = client.get_or_none("apps/v1", "replicasets", rs_ref["name"], p["namespace"]) if rs_ref else None
    dep_ref = _controller_ref(rs) if rs else None
    return bool(dep_ref and dep_ref.get("kind") == "Deployment" and dep_ref.get("name") == p["deployment"]
                and rs_ref["uid"] == rs_uid and dep_ref["uid"] == dep_uid)


def judge_owner_chain(ctx, obs):
    p = ctx.params
    answer = ctx.answer()
    pod_name = str(ctx.answer_field(answer, "pod", str)).strip()
    if not pod_name:
        raise CheckFailed(f"pod: write the name of a Pod of the Deployment {p['deployment']}")
    _object_name(ctx, pod_name, "pod", "Pod", p["namespace"])
    rs_uid = str(ctx.answer_field(answer, "replicaset", str)).strip()
    dep_uid = str(ctx.answer_field(answer, "deployment", str)).strip()
    if obs["writes"]:
        # a change of the chain that fails beside a right reading of it is no wrong answer (run_check)
        ctx.answer_not_wrong = _chain_answer_right(ctx, pod_name, rs_uid, dep_uid)
        return ctx.failed(f"you changed the chain of Deployment {p['deployment']} by hand ({'; '.join(obs['writes'][:3])}"
                          f"{'; …' if len(obs['writes']) > 3 else ''}): reading an owner chain changes nothing, and "
                          "the exercise is judged on the chain as the lab built it — `labkit reset gc "
                          f"{ctx.exercise.id}` builds it again (your answer file stays)",
                          expected=f"no change to Deployment {p['deployment']}, its ReplicaSet or its Pods",
                          observed=obs["writes"], observed_in=LIVE)
    client = for_env(ctx.env).client()
    pod = client.get_or_none("v1", "pods", pod_name, p["namespace"])
    if pod is None:
        raise CheckFailed(f"there is no Pod {pod_name!r} in namespace {p['namespace']}: copy a name from "
                          f"`kubectl get pods -n {p['namespace']} -l app={p['deployment']}`")
    rs_ref = _controller_ref(pod)
    rs = client.get_or_none("apps/v1", "replicasets", rs_ref["name"], p["namespace"]) if rs_ref else None
    dep_ref = _controller_ref(rs) if rs else None
    if not dep_ref or dep_ref.get("kind") != "Deployment" or dep_ref.get("name") != p["deployment"]:
        raise CheckFailed(f"Pod {pod_name} does not belong to the Deployment {p['deployment']}: pick one of its Pods")
    truth = {"replicaset": rs_ref["uid"], "deployment": dep_ref["uid"]}
    given = {"replicaset": rs_uid, "deployment": dep_uid}
    wrong = [k for k in truth if given[k] != truth[k]]
    if not wrong:
        return ctx.passed(f"Pod {pod_name} ← ReplicaSet {rs_ref['name']} ({rs_uid}) ← Deployment "
                          f"{p['deployment']} ({dep_uid}), as its ownerReferences say")
    names = {rs_ref["name"], p["deployment"]}
    if any(given[k] in names for k in wrong):
        reason = "write UIDs (metadata.uid, as in ownerReferences[].uid), not names"
    elif given["replicaset"] == truth["deployment"] and given["deployment"] == truth["replicaset"]:
        reason = "the two UIDs are swapped: the Pod's owner is the ReplicaSet, whose owner is the Deployment"
    elif pod["metadata"]["uid"] in given.values():
        reason = "that is the Pod's own UID; the owners' UIDs are in its ownerReferences (and its owner's)"
    elif all(given[k].lower() == truth[k].lower() for k in wrong):
        # the GC compares UIDs as strings (types.UID; garbagecollector.go attemptToDeleteItem: owner.UID != ...)
        reason = ("these are the right owners in another case: a UID is compared as it is written, character for "
                  "character, so copy it exactly as metadata.uid gives it")
    elif all(given[k] and truth[k].lower().startswith(given[k].lower()) for k in wrong):
        # `labkit gc graph` prints the first 8 characters of each UID, to keep the tree readable
        reason = ("that is the start of the right UID only (`labkit gc graph` shortens UIDs to keep its tree "
                  "readable): the garbage collector compares the whole UID, so copy all of it from metadata.uid "
                  "or ownerReferences[].uid (`kubectl get ... -o yaml`)")
    else:
        reason = "follow ownerReferences from the Pod to its ReplicaSet, then from the ReplicaSet to the Deployment"
    return ctx.failed(f"wrong UID for {' and '.join(wrong)}: {reason}",
                      expected="the UIDs in the ownerReferences chain", observed={k: given[k] for k in wrong})


# -- the lab as built, and labkit's reconstruction of what the GC does to it ----------------------

def _built(ctx) -> dict:
    """What the exercise's part was built as (lab.py's built.json): Pods by UID, and so on."""
    return ctx.lab.environment_module().built(ctx.env).get(ctx.exercise.id) or {}


_MEMORY: dict[str, object] = {}


def _reconstructed(ctx, key: str, inputs, compute, persist: bool = True):
    """`compute()` once for the same `inputs` (a fresh embedded server takes a few seconds):
    kept in this process, and with `persist` in the lab's state directory too (as JSON). A
    prediction's truth is never written down where a student could read it."""
    digest = hashlib.sha256(json.dumps([key, inputs], sort_keys=True).encode()).hexdigest()[:16]
    if digest in _MEMORY:
        return _MEMORY[digest]
    path = Path(ctx.env.dir) / "reconstruction.json"
    cache = {}
    if persist:
        try:
            cache = json.loads(path.read_text())
        except (OSError, ValueError):
            cache = {}
    if digest not in cache:
        cache[digest] = compute()
        if persist:
            write_json_atomic(path, cache)
    _MEMORY[digest] = cache[digest]
    return cache[digest]


def _cascade(ctx, policy: str) -> dict:
    """What labkit's garbage collector does when the exercise's Deployment, as the lab builds it,
    is deleted with `policy` (labkit.gc.reconstruct.cascade), on a server of its own."""
    lab = ctx.lab.environment_module()
    name = ctx.params["deployment"]
    workload = lab.deployment(name, lab.PARTS[ctx.exercise.id]["apps"][name])
    return _reconstructed(ctx, "cascade", [workload, policy],
                          lambda: reconstruct.cascade(workload, ctx.params["namespace"], policy).as_dict())


def _left(objs: list[dict]) -> list[dict]:
    """What is left of a chain, as observations: kind, name, being deleted, finalizers."""
    return [{"kind": o.get("kind"), "name": o["metadata"]["name"],
             "deleting": bool(o["metadata"].get("deletionTimestamp")),
             "finalizers": list(o["metadata"].get("finalizers") or [])} for o in objs]


def _still_going_obs(left: list[dict], what: str, ns: str):
    """The failure for dependents that are still there: on their way out, or not."""
    deleting = all(o["deleting"] for o in left)
    counts = {}
    for o in left:
        counts[o["kind"]] = counts.get(o["kind"], 0) + 1
    tally = " and ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in counts.items())
    # a deletion still going on judges no answer (NotJudged: not counted as a wrong one)
    raise (NotJudged if deleting else CheckFailed)(
        (f"{what} is still going on: check again in a few seconds" if deleting else
         f"{tally} of it are still there and not being deleted: were they orphaned? "
         f"`labkit gc graph -n {ns}` shows them"),
        expected="the Deployment, its ReplicaSet and its Pods gone",
        observed=[f"{o['kind']} {o['name']}" + (" (deleting)" if o["deleting"] else "") for o in left],
        observed_in=LIVE)


def _chain_writes(events, ns: str, app: str, verbs=("update", "patch", "delete")) -> list[dict]:
    """The student's successful requests on the objects of `app` (its Deployment, ReplicaSets and
    Pods), in the order they came: [{verb, kind, name, finalizers}], `finalizers` true when the
    request touched metadata.finalizers."""
    out = []
    for e in _students(events):
        ref = e.get("objectRef") or {}
        if e["verb"] not in verbs or not _ok(e) or ref.get("namespace") != ns or ref.get("resource") not in KINDS:
            continue
        name = ref.get("name") or ""
        if not (name == app or name.startswith(app + "-")):
            continue
        out.append({"verb": e["verb"], "kind": KINDS[ref["resource"]], "name": name,
                    "finalizers": "finalizers" in json.dumps(e.get("requestObject") or ""),
                    **({"policy": _policy(e)} if e["verb"] == "delete" else {})})
    return out


GC_USER = "system:serviceaccount:kube-system:generic-garbage-collector"
DELETERS = {GC_USER: "the garbage collector",
            "system:serviceaccount:kube-system:replicaset-controller": "the ReplicaSet controller",
            "system:serviceaccount:kube-system:deployment-controller": "the Deployment controller"}


def _deleters(events, ns: str, app: str) -> list[dict]:
    """Who sent the first successful DELETE of each ReplicaSet and Pod of `app` (the one that
    starts its deletion; a kubelet's final DELETE of a Pod comes after): [{kind, name, user}]."""
    out, seen = [], set()
    for e in events:
        ref = e.get("objectRef") or {}
        if e.get("verb") != "delete" or not _ok(e) or ref.get("namespace") != ns or ref.get("subresource") \
                or ref.get("resource") not in ("replicasets", "pods") or not (ref.get("name") or "").startswith(app + "-"):
            continue
        key = (ref["resource"], ref["name"])
        if key in seen:
            continue
        seen.add(key)
        out.append({"kind": KINDS[ref["resource"]], "name": ref["name"],
                    "user": (e.get("user") or {}).get("username", "")})
    return out


def _delete_of(events, resource: str, ns: str, name: str) -> str | None:
    """The propagation policy of the student's first successful DELETE of the object, or None."""
    deletes = [e for e in _students(events) if e["verb"] == "delete" and _ok(e) and _on(e, resource, name)
               and (e.get("objectRef") or {}).get("namespace") == ns]
    return _policy(deletes[0]) if deletes else None


def _no_delete(what: str) -> CheckFailed:
    return CheckFailed(f"the audit log has no DELETE of {what} after the lab started: delete it yourself "
                       "(kubectl delete ...), so that the check can see how")


def _cascade_observation(ctx, client, target, resource: str) -> dict:
    """What the background and foreground exercises observe of the live lab."""
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    dep = client.get_or_none("apps/v1", "deployments", name, ns)
    events = _since_ready(ctx, target)
    obs = {"deployment": "gone" if dep is None else "deleting" if dep["metadata"].get("deletionTimestamp")
           else "present", "audit": events is not None,
           "delete": _delete_of(events, "deployments", ns, name) if events is not None else None,
           "writes": _chain_writes(events, ns, name) if events is not None else [],
           "deleted_by": _deleters(events, ns, name) if events is not None else []}
    if dep is not None and not dep["metadata"].get("deletionTimestamp"):
        obs["left"] = []
        return obs

    def left():
        found = _chain(client, ns, name)
        now = client.get_or_none("apps/v1", "deployments", name, ns)
        return ([dict(now, kind="Deployment")] if now else []) + found
    obs["left"] = _left(_gone(left))
    return obs


# -- (b) background ---------------------------------------------------------------------------------

SHORT_NAMES = {"deploy": "Deployment", "rs": "ReplicaSet", "po": "Pod"}     # their APIResources' shortNames


def _kind(value) -> str:
    """A kind as a student may write it (`pods`, `replicaset`, kubectl's short name `rs`) as the API
    names it (`Pod`)."""
    text = str(value).strip()
    if text in SHORT_NAMES:             # as kubectl lists them (`kubectl api-resources`): lower-case
        return SHORT_NAMES[text]
    canonical = {k.lower(): k for k in KINDS.values()}
    return canonical.get(text.lower(), canonical.get(text.lower()[:-1], text) if text.lower().endswith("s") else text)


def _order_answer(ctx, answer, key):
    value = ctx.answer_field(answer, key, list)
    kinds = [_kind(v) for v in value]
    if sorted(kinds) != sorted(KINDS.values()):
        # a form error whatever the lab holds: malformed, no wrong answer (run_check counts none)
        raise AnswerMalformed(f"{key}: list each of the three kinds (Deployment, Pod and ReplicaSet) once, in the order "
                          "their DELETE requests came", expected="Deployment, Pod and ReplicaSet, each once, in some order",
                          observed=value)
    return kinds


def _own_changes(writes: list[dict], name: str) -> list[str]:
    """`deleted 2 Pods`, `changed the Deployment (patch)` — what the student did to the chain
    besides deleting the Deployment once."""
    counts, changed = {}, []
    first = next((w for w in writes if w["verb"] == "delete" and w["kind"] == "Deployment" and w["name"] == name), None)
    for w in writes:
        if w is first:
            continue
        # the same DELETE again, or one without a policy, changes nothing: the options, else the
        # object's own orphan/foregroundDeletion finalizer, decide its finalizers (store.go,
        # deletionFinalizersForGarbageCollection, shouldDeleteDependents / shouldOrphanDependents)
        if (first is not None and w["verb"] == "delete" and w["kind"] == "Deployment" and w["name"] == name
                and w.get("policy") in (first.get("policy"), "default")):
            continue
        if w["verb"] == "delete":
            counts[w["kind"]] = counts.get(w["kind"], 0) + 1
        elif f"changed {w['kind']} {w['name']} ({w['verb']})" not in changed:
            changed.append(f"changed {w['kind']} {w['name']} ({w['verb']})")
    return [f"deleted {n} {k}{'s' if n > 1 else ''} of {name}" for k, n in counts.items()] + changed


def _changed_note(writes: list[dict], name: str) -> str:
    own = _own_changes(writes, name)
    return (f" (You {' and '.join(own)} yourself, which changed the situation: your answer is judged "
            "against what the garbage collector does to the lab as built, where you only delete the Deployment.)"
            if own else "")


def observe_background_delete(ctx):
    target = for_env(ctx.env)
    return _cascade_observation(ctx, target.client(), target, "deployments")


def judge_background_delete(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    order = _order_answer(ctx, ctx.answer(), "order")
    if obs["deployment"] == "present":
        # nothing to judge the answer on yet: no wrong answer (NotJudged)
        raise NotJudged(f"the Deployment {name} is still there: delete it (`kubectl delete deployment {name} -n {ns}`)")
    truth = _cascade(ctx, "Background")["delete_order"]
    # a deletion that fails beside a right order is no wrong answer (run_check counts none)
    ctx.answer_not_wrong = order == truth
    if obs["audit"]:
        if obs["delete"] is None:
            raise _no_delete(f"Deployment {name}")
        if obs["delete"] not in ("Background", "default"):
            return ctx.failed(f"you deleted Deployment {name} with propagationPolicy {obs['delete']}: this exercise is "
                              "about background deletion (kubectl's default, --cascade=background); "
                              f"`labkit reset gc {ctx.exercise.id}` brings it back",
                              expected="propagationPolicy Background", observed=obs["delete"], observed_in=LIVE)
    own = _own_changes(obs["writes"], name)
    if own:
        return ctx.failed(f"you {' and '.join(own)} yourself: in this exercise the ReplicaSet and the Pods are left "
                          "to the garbage collector, and what you did changed the situation the question is about "
                          f"(a background deletion of the Deployment as the lab builds it) — `labkit reset gc "
                          f"{ctx.exercise.id}`, then delete only the Deployment (your answer file stays)",
                          expected=f"no request of yours on {name}'s objects but one DELETE of the Deployment",
                          observed=own, observed_in=LIVE)
    # solved: "the garbage collector deleted the dependents" — who sent each first DELETE
    others = [d for d in obs.get("deleted_by") or [] if d["user"] != GC_USER]
    if others:
        first = others[0]
        who = DELETERS.get(first["user"], first["user"])
        return ctx.failed(f"{first['kind']} {first['name']} was deleted by {who}, not by the garbage collector"
                          f"{f' (and {len(others) - 1} more)' if len(others) > 1 else ''}: the exercise is about the "
                          "garbage collector removing the dependents of a Deployment deleted in the background; the "
                          f"audit log and `labkit gc log` show who deleted what (`labkit reset gc {ctx.exercise.id}`)",
                          expected="every ReplicaSet and Pod of the Deployment deleted by the garbage collector",
                          observed=[f"{d['kind']} {d['name']}: {DELETERS.get(d['user'], d['user'])}" for d in others],
                          observed_in=LIVE)
    if obs["left"]:
        _still_going_obs(obs["left"], "the background deletion", ns)
    if order != truth:
        return ctx.failed("order: that is not the order in which the DELETE requests of the Deployment, its "
                          "ReplicaSet and its Pods come when the Deployment is deleted in the background: look "
                          "them up in the audit log, or in `labkit gc log` (which says when the garbage collector "
                          "deleted what)",
                          expected="the order of the first DELETE of each kind", observed=order,
                          right_answer={"order": truth})
    if not obs["audit"]:
        return ctx.passed(f"background deletion: {' → '.join(truth)} (labkit's reconstruction); "
                          + NO_LOG.format(what="how you deleted the Deployment and who deleted its dependents"))
    return ctx.passed(f"background deletion: {' → '.join(truth)}; the owner went at once, the GC deleted its "
                      "dependents afterwards")


def check_background_delete(ctx):
    return judge_background_delete(ctx, observe_background_delete(ctx))


# -- (c) foreground ---------------------------------------------------------------------------------

def observe_foreground_delete(ctx):
    target = for_env(ctx.env)
    return _cascade_observation(ctx, target.client(), target, "deployments")


def judge_foreground_delete(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    answer = ctx.answer()
    finalizer = str(ctx.answer_field(answer, "finalizer", str)).strip()
    last = str(ctx.answer_field(answer, "last", str)).strip()
    last = _kind(last)
    if last not in KINDS.values():
        raise AnswerMalformed("last: write one of Deployment, Pod and ReplicaSet", expected="one of Deployment, Pod and "
                          "ReplicaSet", observed=last)
    if obs["deployment"] == "present":
        # nothing to judge the answer on yet: no wrong answer (NotJudged)
        raise NotJudged(f"the Deployment {name} is still there: delete it with --cascade=foreground")
    truth = _cascade(ctx, "Foreground")
    # a deletion that fails beside a right answer is no wrong answer (run_check counts none)
    ctx.answer_not_wrong = finalizer in truth["waited_with"] and last == (truth["removed"] or [None])[-1]
    if obs["audit"]:
        if obs["delete"] is None:
            raise _no_delete(f"Deployment {name}")
        if obs["delete"] != "Foreground":
            return ctx.failed(f"you deleted Deployment {name} with propagationPolicy {obs['delete']}, not Foreground: "
                              f"the owner did not wait for its dependents (`labkit reset gc {ctx.exercise.id}` and try "
                              "`--cascade=foreground`)", expected="propagationPolicy Foreground", observed=obs["delete"],
                              observed_in=LIVE)
    # a second DELETE of the waiting Deployment with Background or Orphan changes its finalizers too:
    # the API server drops foregroundDeletion (store.go, deletionFinalizersForGarbageCollection)
    again = [w for w in [w for w in obs["writes"] if w["verb"] == "delete" and w["kind"] == "Deployment"
                         and w["name"] == name][1:] if w.get("policy") in ("Background", "Orphan")]
    first_delete = next((i for i, w in enumerate(obs["writes"]) if w["verb"] == "delete" and w["kind"] == "Deployment"
                         and w["name"] == name), len(obs["writes"]))
    before = [w for w in obs["writes"][:first_delete] if w["verb"] in ("update", "patch", "delete")]
    if before:
        first = before[0]
        return ctx.failed(f"you changed {first['kind']} {first['name']} by hand ({first['verb']}) before you deleted the "
                          "Deployment: the exercise is about a foreground deletion of the Deployment as the lab builds "
                          "it, and a change made first changes what the deletion has to wait for "
                          f"(`labkit reset gc {ctx.exercise.id}` and delete it without touching it first)",
                          expected="no change to the Deployment, its ReplicaSet or its Pods but your DELETE",
                          observed=[f"{w['verb']} {w['kind']} {w['name']}" for w in before], observed_in=LIVE)
    # the dependents are the garbage collector's to delete: a DELETE of the waiting ReplicaSet with
    # Background or Orphan (kubectl's default is Background) drops its foregroundDeletion too (same
    # function), so the Deployment can go before the Pods; a Pod deleted by hand is not the GC's work
    dependents = [w for w in obs["writes"][first_delete:] if w["verb"] == "delete" and w["kind"] != "Deployment"]
    hand = [w for w in obs["writes"][first_delete:] if w["verb"] in ("update", "patch")] + again + dependents
    if hand:
        first = hand[0]
        obj = f"{first['kind']} {first['name']}"
        what = (f"deleted {obj} yourself (propagationPolicy {first.get('policy')}), a dependent the garbage collector "
                "deletes" if first["verb"] == "delete" and first["kind"] != "Deployment" else
                f"deleted {obj} a second time, with propagationPolicy {first.get('policy')}" if first["verb"] == "delete" else
                f"removed or changed the finalizers of {obj} by hand" if first["finalizers"] else
                f"changed {obj} by hand ({first['verb']})")
        return ctx.failed(f"you {what} while the foreground deletion went on: the dependents of a foreground "
                          "deletion and its finalizers are the garbage collector's, which deletes each dependent and "
                          "removes each finalizer once no dependent blocks it; removing one by hand, or a second DELETE "
                          "with Background or Orphan of the Deployment or of its waiting ReplicaSet (which drops it), "
                          "lets an owner go before its dependents, so what you saw is not what the exercise asks about "
                          f"(`labkit reset gc {ctx.exercise.id}` and delete it again, without touching it)",
                          expected="no change to the Deployment, its ReplicaSet or its Pods but your DELETE",
                          observed=[f"{w['verb']} {w['kind']} {w['name']}" for w in hand], observed_in=LIVE)
    if obs["left"]:
        _still_going_obs(obs["left"], "the foreground deletion", ns)
    changed = _changed_note(obs["writes"], name)
    wrong = []
    if finalizer not in truth["waited_with"]:
        wrong.append("finalizer")
    if last != (truth["removed"] or [None])[-1]:
        wrong.append("last")
    if wrong:
        # no verdict per field while the answer can earn its points: `last` has three values, and
        # naming the wrong field would let them be tried in turn
        return ctx.failed(ctx.grid_feedback(wrong, 2, "parts", noun="answer",
                                            advice=f"look at the Deployment while it is being deleted (`kubectl get "
                                                   f"deploy {name} -n {ns} -o yaml`), and compare when each kind leaves "
                                                   "the API, in the audit log or in `labkit gc log`") + changed,
                          expected="the finalizer the Deployment carried while it waited, and the kind of the last "
                          "object removed", observed={"finalizer": finalizer, "last": last},
                          right_answer={"finalizer": truth["waited_with"][0] if truth["waited_with"] else None,
                                        "last": (truth["removed"] or [None])[-1]})
    if not obs["audit"]:
        return ctx.passed("the Deployment and its dependents are gone, and your answer is what labkit's reconstruction "
                          "does; " + NO_LOG.format(what="how you deleted the Deployment"))
    return ctx.passed(f"foreground deletion: the Deployment waited with {finalizer} while its dependents went, "
                      f"and was removed last{changed}")


def check_foreground_delete(ctx):
    return judge_foreground_delete(ctx, observe_foreground_delete(ctx))


# -- (d) orphan and adopt ---------------------------------------------------------------------------

def _selects_exactly(selector, label: str, value: str) -> bool:
    """Whether a LabelSelector requires exactly `label=value` and nothing else (matchLabels, or a
    matchExpressions `In` with that one value: the same set of objects)."""
    if not isinstance(selector, dict):
        return False
    reqs = set()
    for k, v in (selector.get("matchLabels") or {}).items():
        reqs.add((k, "In", (str(v),)))
    for e in selector.get("matchExpressions") or []:
        reqs.add((e.get("key"), e.get("operator"), tuple(sorted(str(v) for v in e.get("values") or []))))
    return reqs == {(label, "In", (value,))}


def observe_orphan_adopt(ctx):
    p = ctx.params
    ns, old, new = p["namespace"], p["replicaset"], p["new_replicaset"]
    target = for_env(ctx.env)
    client = target.client()
    events = _since_ready(ctx, target)
    rs = client.get_or_none("apps/v1", "replicasets", old, ns)
    new_rs = client.get_or_none("apps/v1", "replicasets", new, ns)

    def pods():
        return sorted(({"name": q["metadata"]["name"], "uid": q["metadata"]["uid"],
                        "controller": (_controller_ref(q) or {}).get("uid"),
                        "deleting": bool(q["metadata"].get("deletionTimestamp"))}
                       for q in client.list("v1", "pods", ns, label_selector=f"app={old}")[0]),
                      key=lambda q: q["name"])
    seen = settle(pods, timeout=BRIEF, stable_for=0.5)
    return {"old": None if rs is None else ("deleting" if rs["metadata"].get("deletionTimestamp") else "present"),
            "new": None if new_rs is None else {"uid": new_rs["metadata"]["uid"],
                                                "replicas": (new_rs.get("spec") or {}).get("replicas", 1),
                                                "selector": (new_rs.get("spec") or {}).get("selector")},
            "pods": seen.value, "settled": seen.settled, "audit": events is not None,
            "originals": sorted((_built(ctx).get("pods") or {}).get(old) or []),
            "delete": _delete_of(events, "replicasets", ns, old) if events is not None else None,
            # DELETEs of the old ReplicaSet's own Pods (by name: as the lab built them), by anyone
            "deleted_pods": sorted({e["objectRef"]["name"] for e in events or [] if e["verb"] == "delete" and _ok(e)
                                    and _on(e, "pods", prefix=f"{old}-")
                                    and e["objectRef"]["name"] in ((_built(ctx).get("pod_names") or {}).get(old) or [])
                                    and (e.get("objectRef") or {}).get("namespace") == ns}),
            # Pods created with the label app=<old> (by a controller or by hand) since the part was built
            "created_pods": sum(1 for e in events or [] if e["verb"] == "create" and _ok(e)
                                and _on(e, "pods", prefix="") and (e.get("objectRef") or {}).get("namespace") == ns
                                and isinstance(e.get("requestObject"), dict)
                                and ((e["requestObject"].get("metadata") or {}).get("labels") or {}).get("app") == old)}


def judge_orphan_adopt(ctx, obs):
    p = ctx.params
    ns, old, new = p["namespace"], p["replicaset"], p["new_replicaset"]
    originals = set(obs["originals"])
    if obs["old"] is not None:
        raise CheckFailed(f"the ReplicaSet {old} is still there" + (" (being deleted: check again in a moment)"
                          if obs["old"] == "deleting" else ": delete it without its Pods"))
    if obs["audit"]:
        if obs["delete"] is None:
            raise _no_delete(f"ReplicaSet {old}")
        if obs["delete"] != "Orphan":
            return ctx.failed(f"you deleted ReplicaSet {old} with propagationPolicy {obs['delete']}: its Pods went with "
                              f"it (`labkit reset gc {ctx.exercise.id}`, then --cascade=orphan)",
                              expected="propagationPolicy Orphan", observed=obs["delete"], observed_in=LIVE)
    new_rs = obs["new"]
    if new_rs is None:
        raise CheckFailed(f"there is no ReplicaSet {new} in {ns} yet: create it with the selector app={old}")
    live_pods = [q for q in obs["pods"] if not q["deleting"]]
    strays = [q for q in live_pods if q["controller"] != new_rs["uid"]]
    made = [q["name"] for q in live_pods if q["uid"] not in originals]
    if not _selects_exactly(new_rs["selector"], "app", old):
        return ctx.failed(f"the selector of {new} is not the one the prompt asks for (app={old}, as {old} had): "
                          f"the ReplicaSet controller adopts only orphans its selector matches, and {new} must match "
                          f"just {old}'s Pods (compare `kubectl get rs {new} -n {ns} -o yaml` with the Pods' labels)"
                          + (f"; {len(strays)} Pod(s) labelled app={old} are not controlled by {new}" if strays else ""),
                          expected=f"a selector of exactly app={old}", observed=new_rs["selector"], observed_in=LIVE)
    if new_rs["replicas"] != 2:
        return ctx.failed(f"{new} asks for {new_rs['replicas']} replicas; the prompt asks for 2 (as many as {old} "
                          "left to adopt): with more its controller creates new Pods, with fewer it deletes adopted ones"
                          + (f"; {len(made)} Pod(s) labelled app={old} are new, not adopted" if made else ""),
                          expected="2 replicas", observed=new_rs["replicas"], observed_in=LIVE)
    if not obs["settled"]:
        return ctx.error(f"the Pods labelled app={old} are still changing owners: check again in a few seconds")
    state = [q for q in obs["pods"] if not q["deleting"]]
    killed = sorted(set(obs["deleted_pods"]) | {q["name"] for q in obs["pods"] if q["deleting"] and q["uid"] in originals}
                    | ({f"{len(originals - {q['uid'] for q in obs['pods']})} of {old}'s Pods no longer stored"}
                       if originals - {q["uid"] for q in obs["pods"]} else set()))
    if killed:
        also = (f"; {obs['created_pods']} new Pod(s) labelled app={old} were created on the way"
                if obs.get("created_pods") else "")
        return ctx.failed(f"{old}'s own Pods were deleted after you orphaned them{also}; the new ReplicaSet must "
                          "adopt them, not replace them (`labkit gc log` says who deleted them and why; "
                          f"`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected=f"no Pod of {old} deleted", observed=killed, observed_in=LIVE)
    strays = [q for q in state if q["controller"] != new_rs["uid"]]
    if strays:
        return ctx.failed(f"{len(strays)} Pod(s) labelled app={old} are not controlled by {new}: the ReplicaSet "
                          "controller adopts only orphans that its selector matches (compare the selector of "
                          f"{new} with the Pods' labels)", expected=f"every Pod labelled app={old} controlled by {new}",
                          observed=[f"{q['name']}: {'controller ' + q['controller'][:8] if q['controller'] else 'no controller'}"
                                    for q in strays], observed_in=LIVE)
    made = [q["name"] for q in state if q["uid"] not in originals]
    if made:
        return ctx.failed(f"{len(made)} Pod(s) labelled app={old} are new, not adopted: {new}'s controller created "
                          f"them (were {old}'s Pods gone before {new} could adopt them?)",
                          expected=f"only {old}'s own Pods, adopted by {new}", observed=made, observed_in=LIVE)
    if obs.get("created_pods"):
        return ctx.failed(f"{obs['created_pods']} new Pod(s) labelled app={old} were created on the way (and deleted "
                          f"again): no Pod may be created or deleted. Was {new} there before {old}'s Pods were "
                          f"orphans, or did it ask for more than 2 replicas for a while? (`labkit gc log` and the audit log say who created what; `labkit reset gc "
                          f"{ctx.exercise.id}` to start over)", expected="no Pod created", observed=obs["created_pods"],
                          observed_in=LIVE)
    if not obs["audit"]:
        return ctx.passed(f"{new} controls {old}'s own Pods; " + NO_LOG.format(what="the policy used"))
    return ctx.passed(f"{old}'s Pods were orphaned (Orphan) and {new} adopted the same {len(state)} Pods")


def check_orphan_adopt(ctx):
    return judge_orphan_adopt(ctx, observe_orphan_adopt(ctx))


# -- (e) blockOwnerDeletion -------------------------------------------------------------------------

def observe_unblocking_dependent(ctx):
    p = ctx.params
    ns, owner, dep_name = p["namespace"], p["owner"], p["dependent"]
    target = for_env(ctx.env)
    client = target.client()
    cm = client.get_or_none("v1", "configmaps", owner, ns)
    dep = client.get_or_none("v1", "secrets", dep_name, ns)
    events = _since_ready(ctx, target)
    return {"owner": None if cm is None else {"uid": cm["metadata"]["uid"],
                                              "deleting": bool(cm["metadata"].get("deletionTimestamp"))},
            "dependent": None if dep is None else {"finalizers": list(dep["metadata"].get("finalizers") or []),
                                                   "ownerReferences": dep["metadata"].get("ownerReferences") or [],
                                                   "data": dep.get("data") or {}},
            "audit": events is not None, "built": _built(ctx),
            "delete": _delete_of(events, "configmaps", ns, owner) if events is not None else None,
            "owner_writes": [{"verb": e["verb"], **({"policy": _policy(e)} if e["verb"] == "delete" else {})}
                             for e in _students(events or []) if e["verb"] in ("update", "patch", "delete") and _ok(e)
                             and _on(e, "configmaps", owner) and (e.get("objectRef") or {}).get("namespace") == ns],
            # what each of the student's writes to the Secret sent (the audit log keeps write bodies):
            # a reference pointed elsewhere and back again shows only here
            "dependent_writes": [{"verb": e["verb"], "body": e.get("requestObject")}
                                 for e in _students(events or []) if e["verb"] in ("update", "patch") and _ok(e)
                                 and _on(e, "secrets", dep_name) and (e.get("objectRef") or {}).get("namespace") == ns]}


IDENTITY = ("apiVersion", "kind", "name", "uid", "controller")     # what makes an owner reference that owner


def _reference_rewrites(writes: list[dict], built: dict) -> list[str]:
    """The fields of the owner reference `built` that one of `writes` (update and patch bodies: a
    whole object, a merge patch, or a JSON patch) set to something else or removed on the way,
    whatever the reference says now: `uid (patch)`."""
    out = []

    def compare(ref, verb):
        if not isinstance(ref, dict):
            return
        for key in IDENTITY:
            if key in ref and (bool(ref[key]) != bool(built.get(key)) if key == "controller"
                               else ref[key] != built.get(key)):
                out.append(f"{key} ({verb})")
    for w in writes:
        body, verb = w.get("body"), w.get("verb")
        if isinstance(body, list):              # a JSON patch: its operations on ownerReferences
            for op in body:
                path = str((op or {}).get("path", "")).split("/")[1:]
                if path[:2] != ["metadata", "ownerReferences"]:
                    continue
                field = path[3] if len(path) > 3 else None
                if op.get("op") in ("add", "replace") and field in IDENTITY:
                    compare({field: op.get("value")}, verb)
                elif op.get("op") in ("add", "replace") and field is None:
                    value = op.get("value")
                    for ref in value if isinstance(value, list) else [value]:
                        compare(ref, verb)
                elif op.get("op") in ("remove", "move") and (field is None or field in IDENTITY):
                    out.append(f"{field or 'the reference'} removed ({verb})")
        elif isinstance(body, dict) and "ownerReferences" in (body.get("metadata") or {}):
            refs = body["metadata"]["ownerReferences"]
            if not refs:
                out.append(f"the reference removed ({verb})")
            for ref in refs or []:
                compare(ref, verb)
    return list(dict.fromkeys(out))


def _finalizer_removals(writes: list[dict], finalizer: str) -> list[str]:
    """The student's writes to the dependent (update and patch bodies: a whole object, a merge
    patch, or a JSON patch) that took `finalizer` off on the way, whatever its finalizers say now:
    `patch`, `update`."""
    out = []
    for w in writes:
        body, verb = w.get("body"), w.get("verb")
        if isinstance(body, list):              # a JSON patch: a remove, replace or move of finalizers
            for op in body:
                path = str((op or {}).get("path", "")).split("/")[1:]
                if path[:2] != ["metadata", "finalizers"] or op.get("op") not in ("remove", "replace", "move"):
                    continue
                value = op.get("value")
                if op.get("op") == "replace" and (value == finalizer or (isinstance(value, list)
                                                                         and finalizer in value)):
                    continue
                out.append(verb)
        elif isinstance(body, dict):
            meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
            # a whole object or a merge patch that lists the finalizers without it; a strategic merge
            # patch's $deleteFromPrimitiveList directive that names it
            if ("finalizers" in meta and finalizer not in (meta["finalizers"] or [])) \
                    or finalizer in (meta.get("$deleteFromPrimitiveList/finalizers") or []):
                out.append(verb)
    return list(dict.fromkeys(out))


def judge_unblocking_dependent(ctx, obs):
    p = ctx.params
    owner, dep_name, fin = p["owner"], p["dependent"], p["finalizer"]
    built_secret = obs["built"].get("secret") or {}
    dep = obs["dependent"]
    if dep is not None:
        dep = {"finalizers": dep.get("finalizers") or [], "ownerReferences": dep.get("ownerReferences") or [],
               "data": dep.get("data") or {}}
    if dep is None or fin not in dep["finalizers"]:
        return ctx.failed(f"Secret {dep_name} " + ("is gone" if dep is None else f"lost its finalizer {fin}")
                          + ": its finalizer was removed; the task was to keep it and stop the Secret from "
                          f"blocking its owner (`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected=f"{dep_name} still there with {fin}",
                          observed="gone" if dep is None else dep["finalizers"] or "no finalizers", observed_in=LIVE)
    if sorted(dep["finalizers"]) != sorted(built_secret.get("finalizers") or [fin]):
        return ctx.failed(f"the finalizers of {dep_name} are not the ones it was built with: leave them as they were "
                          "(only whoever added a finalizer removes it)", expected=f"the finalizers {dep_name} had",
                          observed=dep["finalizers"], observed_in=LIVE)
    if obs["owner"] is not None:
        if obs["owner"]["deleting"]:
            return ctx.failed(f"ConfigMap {owner} is waiting (foregroundDeletion) for its dependent {dep_name}, "
                              f"whose owner reference still blocks it: look at the fields of {dep_name}'s owner "
                              f"reference to {owner}", expected=f"{owner} removed from the API while {dep_name} waits",
                              observed=f"{owner} being deleted, waiting", observed_in=LIVE)
        raise CheckFailed(f"ConfigMap {owner} is still there: delete it with --cascade=foreground")
    if obs["audit"]:
        if obs["delete"] is None:
            raise _no_delete(f"ConfigMap {owner}")
        if obs["delete"] != "Foreground":
            return ctx.failed(f"you deleted {owner} with propagationPolicy {obs['delete']}: without Foreground the owner "
                              f"goes at once whatever its dependents say (`labkit reset gc {ctx.exercise.id}`)",
                              expected="propagationPolicy Foreground", observed=obs["delete"], observed_in=LIVE)
    # the owner's foregroundDeletion is the garbage collector's: a patch, or a second DELETE with
    # Background or Orphan (store.go, deletionFinalizersForGarbageCollection), takes it off by hand
    forced = [w for w in obs.get("owner_writes") or [] if w["verb"] in ("update", "patch")] + \
        [w for w in [w for w in obs.get("owner_writes") or [] if w["verb"] == "delete"][1:]
         if w.get("policy") in ("Background", "Orphan")]
    if forced:
        how = (f"a second DELETE with propagationPolicy {forced[0].get('policy')}" if forced[0]["verb"] == "delete"
               else f"a {forced[0]['verb']}")
        return ctx.failed(f"you changed ConfigMap {owner} by hand ({how}) while its foreground deletion waited: its "
                          "foregroundDeletion finalizer is the garbage collector's to remove; the task is to change "
                          f"the dependent so that the garbage collector lets {owner} go "
                          f"(`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected=f"no change to {owner} but your DELETE", observed=[w["verb"] for w in forced],
                          observed_in=LIVE)
    originals = {r.get("uid"): r for r in built_secret.get("ownerReferences") or []}
    refs = dep["ownerReferences"]
    kept = [r for r in refs if r.get("uid") in originals or r.get("name") == owner]
    if not kept:
        return ctx.failed(f"{dep_name} no longer names {owner} as its owner: keep the owner reference, change only "
                          "what makes it block its owner", expected=f"an owner reference to {owner}",
                          observed=[f"{r.get('kind')} {r.get('name')}" for r in refs] or "no owner references",
                          observed_in=LIVE)
    extra = [r for r in refs if r not in kept]
    if extra:
        return ctx.failed(f"{dep_name} has owner references it did not have: leave its owners as they were",
                          expected=f"only the owner reference to {owner}",
                          observed=[f"{r.get('kind')} {r.get('name')}" for r in extra], observed_in=LIVE)
    for ref in kept:
        original = originals.get(ref.get("uid")) or next(iter(originals.values()), {})
        changed = [k for k in ("apiVersion", "kind", "name", "uid") if ref.get(k) != original.get(k)]
        changed += ["controller"] if bool(ref.get("controller")) != bool(original.get("controller")) else []
        if changed:
            return ctx.failed(f"{dep_name}'s owner reference to {owner} was changed ({', '.join(changed)}): it no "
                              f"longer points at the ConfigMap {owner} as the lab built it; keep the reference, change "
                              "only what makes it block", expected=f"the owner reference to {owner}, unchanged but for "
                              "what makes it block", observed=changed, observed_in=LIVE)
        if ref.get("blockOwnerDeletion") is True:
            return ctx.failed(f"{dep_name}'s owner reference to {owner} still blocks a foreground deletion of its owner "
                              f"(so {owner} cannot have gone in the foreground as the task asks): look at the fields of "
                              "that reference", expected="a reference that does not block its owner",
                              observed="a blocking reference", observed_in=LIVE)
    rewrites = _reference_rewrites(obs.get("dependent_writes") or [],
                                   next(iter(originals.values()), {}))
    if rewrites:
        return ctx.failed(f"{dep_name}'s owner reference to {owner} was changed on the way ({', '.join(rewrites)}), "
                          f"though it may be back now: while it pointed elsewhere {owner} had no dependent to wait "
                          "for, so it did not go because its dependent stopped blocking it. Keep the reference, "
                          f"change only what makes it block (`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected="no write of the reference's owner (apiVersion, kind, name, uid, controller)",
                          observed=rewrites, observed_in=LIVE)
    # solved: "the finalizers of the dependent: none removed" -- taking the finalizer off and putting
    # it back is removing it (the prompt: "do not remove the finalizer"), though it ends where it was
    removals = _finalizer_removals(obs.get("dependent_writes") or [], fin)
    if removals:
        return ctx.failed(f"you took the finalizer {fin} off {dep_name} on the way ({', '.join(removals)}), though it "
                          "is back now: the finalizer belongs to the outside system that must clean up first, and "
                          "the task leaves it alone all along; change only what makes the owner reference block "
                          f"(`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected=f"no write of yours that removes {fin}", observed=removals, observed_in=LIVE)
    if "data" in built_secret and dep["data"] != built_secret["data"]:
        return ctx.failed(f"the data of {dep_name} changed: the task changes only its owner reference",
                          expected=f"{dep_name}'s data as it was", observed="changed data", observed_in=LIVE)
    if not obs["audit"]:
        return ctx.passed(f"ConfigMap {owner} is gone while {dep_name} still holds {fin} and names it as owner; "
                          + NO_LOG.format(what="the propagation policy you used"))
    return ctx.passed(f"ConfigMap {owner} went in the foreground while {dep_name} still holds {fin}: a dependent "
                      "that does not block does not hold up its owner")


def check_unblocking_dependent(ctx):
    return judge_unblocking_dependent(ctx, observe_unblocking_dependent(ctx))


# -- (f) predict dangling owners ---------------------------------------------------------------------

FATES = ("deleted", "kept")
SUBJECTS = ("orphan", "shared", "stranger")
from labkit import predictions      # the prediction as it was when `labkit gc run` showed the outcome


def _predicted(ctx, experiment: str) -> dict:
    """What labkit's reconstruction does to the experiment (labkit.gc.reconstruct.predict, on a
    server of its own: nothing of it shows in the lab's logs): {subject: deleted | kept},
    shared_owners, stranger_event."""
    def compute():
        with tempfile.TemporaryDirectory(prefix="labkit-gc-predict-") as tmp:
            path = Path(tmp) / Path(ctx.params["experiment"]).name
            path.write_text(experiment)
            played = reconstruct.predict(path)
        return {**{k: "deleted" if played.present[k] is None else "kept" for k in SUBJECTS},
                "shared_owners": played.owners["shared"], "stranger_event": (played.warnings["stranger"] or ["none"])[0]}
    return _reconstructed(ctx, "predict", experiment, compute, persist=False)


def _experiment_text(ctx) -> tuple[str, str]:
    """The experiment as the lab was built (built.json), and a note when the file differs now."""
    path = ctx.lab.directory / ctx.params["experiment"]
    now = path.read_text() if path.exists() else ""
    built = _built(ctx).get("experiment") or now
    note = (f" ({ctx.params['experiment']} differs from the experiment the lab was built with: your prediction is "
            "judged on the experiment as built)") if now != built else ""
    return built, note


def _prediction(ctx):
    """The answer to judge, and a note: the answer file, or the prediction as it was when
    `labkit gc run` first showed the experiment's outcome (a prediction made after seeing it
    is not one)."""
    return predictions.graded_answer(ctx)


def _first_try(ctx) -> dict | None:
    """The first sign, since the part was built, that the student tried the experiment in the lab's
    own cluster ({at, time, what, how}, see the lab's first_try), or None."""
    return ctx.lab.environment_module().first_try(ctx.env, ctx.ready_time)


def _written_at(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def observe_predict_dangling(ctx):
    """The prediction to judge, and the experiment as the lab was built (the truth is the
    reconstruction of that experiment). Live, only the audit and decision logs: a prediction
    written (or changed) after the student tried the experiment in the lab's cluster is not
    judged (`tried`, see _first_try), also when the try was before a reset (the lab's
    keep_student_work kept it: labkit.predictions.keep_trial)."""
    tried = _first_try(ctx)
    earlier = predictions.kept_trial(ctx.lab.id, ctx.exercise.id)     # kept before a reset cleared the logs
    if earlier is not None and (tried is None or earlier["at"] <= tried["at"]):
        tried = earlier
    kept = predictions.kept(ctx.lab.id, ctx.exercise.id)
    revealed = kept.at if kept is not None else None
    if tried is not None and revealed is not None and revealed <= tried["at"]:
        tried = None            # the copy `labkit gc run` kept was written before the try: that one is judged
    if tried is not None and (_written_at(ctx.answer_path) or 0) < tried["at"]:
        tried = None            # the answer file has not changed since before the try
    answer, note = _prediction(ctx)
    experiment, changed = _experiment_text(ctx)
    return {"answer": answer, "note": note + changed, "experiment": experiment, "tried": tried}


def judge_predict_dangling(ctx, obs):
    answer, note = obs["answer"], obs["note"]
    if obs.get("tried"):
        tried = obs["tried"]
        if tried.get("how") == "elsewhere":
            how = (f"you tried the experiment on another labkit API server yourself: its garbage collector already "
                   f"handled {tried['what']} (at {tried['time']}; `labkit gc log --state {tried['server']}` has it)")
            seen = f"answer written after: the garbage collector of {tried['server']} handled {tried['what']}"
        elif tried.get("how") == "gc":
            how = (f"you tried the experiment in the lab's cluster yourself: its garbage collector already handled "
                   f"{tried['what']} (at {tried['time']}; `labkit gc log` has it)")
            seen = f"answer written after: the garbage collector handled {tried['what']}"
        else:
            how = (f"you made objects in the experiment's namespaces of the lab's cluster yourself (create "
                   f"{tried['what']}, at {tried['time']})")
            seen = f"answer written after: create {tried['what']}"
        return ctx.failed(f"{how}, and your prediction was written or changed after that: a prediction made after "
                          "trying the experiment by hand is not one, and earns no points. Work it out from how the "
                          "garbage collector decides (see the hints)",
                          expected="a prediction written before the experiment was tried in the lab's cluster",
                          observed=seen, observed_in=LIVE)
    given = {}
    for key in SUBJECTS:
        value = str(ctx.answer_field(answer, key, str)).strip().lower()
        if value not in FATES:
            raise CheckFailed(f"{key}: write deleted or kept", expected="deleted or kept", observed=value)
        given[key] = value
    shared_owners = sorted(str(v).strip() for v in ctx.answer_field(answer, "shared_owners", list))
    event = str(ctx.answer_field(answer, "stranger_event", str)).strip()
    truth = _predicted(ctx, obs["experiment"])
    wrong = [k for k in SUBJECTS if given[k] != truth[k]]
    if shared_owners != sorted(truth["shared_owners"]) and not (truth["shared"] == "deleted" and given["shared"] == "deleted"):
        wrong.append("shared_owners")
    if event.lower() != truth["stranger_event"].lower() and not (truth["stranger_event"] == "none" and event == ""):
        wrong.append("stranger_event")
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, len(SUBJECTS) + 2, "parts",
                                            advice="work it out from how the garbage collector decides, not by "
                                                   "trying it (a prediction written after trying it in the lab's "
                                                   "cluster earns no points)") + note + ". For each owner "
                          "reference the GC looks the owner up by name in the dependent's own namespace and compares "
                          "UIDs (see the hints)", expected="what the garbage collector does to the experiment's objects",
                          right_answer=truth)
    return ctx.passed("your prediction is what labkit's garbage collector does to the experiment's objects" + note)


def check_predict_dangling(ctx):
    return judge_predict_dangling(ctx, observe_predict_dangling(ctx))


# -- (g) stuck finalizer ------------------------------------------------------------------------------

def observe_stuck_finalizer(ctx):
    p = ctx.params
    ns, name = p["namespace"], p["replicaset"]
    target = for_env(ctx.env)
    client = target.client()
    events = _since_ready(ctx, target)

    def left():
        rs = client.get_or_none("apps/v1", "replicasets", name, ns)
        return ([dict(rs, kind="ReplicaSet")] if rs else []) + [o for o in _chain(client, ns, name) if o["kind"] == "Pod"]
    remaining = left()
    # wait only for what can go by itself: Pods in their grace period, an owner whose dependents went
    if remaining and not any(_held(o) for o in remaining):
        remaining = _gone(left)
    return {"left": _left(remaining), "audit": events is not None, "held": _built(ctx).get("held") or {},
            "writes": [w for w in _chain_writes(events or [], ns, name) if w["kind"] == "ReplicaSet"],
            "pod_writes": _pod_writes(events or [], ns, name)}


def _touched(verb: str, body) -> list[str]:
    """What a patch or update of a Pod sets besides metadata.finalizers (and the resourceVersion
    it is sent with): `metadata.ownerReferences`, `metadata.labels`, `spec`, ... An update sends
    the whole object: it counts as changing what it leaves out of metadata that a Pod of the lab
    has (its ownerReferences, its labels)."""
    if isinstance(body, list):          # JSON patch: each operation's path
        return sorted({"/".join(str(op.get("path", "")).split("/")[:3]).lstrip("/").replace("/", ".")
                       for op in body if isinstance(op, dict) and op.get("op") != "test"
                       and not str(op.get("path", "")).startswith("/metadata/finalizers")})
    if not isinstance(body, dict):
        return []
    meta = body.get("metadata") or {}
    if verb == "update":
        return [f"metadata.{k}" for k in ("ownerReferences", "labels") if not meta.get(k)]
    return sorted([k for k in body if k not in ("metadata", "apiVersion", "kind")] +
                  [f"metadata.{k}" for k in meta if k not in ("finalizers", "resourceVersion", "name", "namespace",
                                                           "uid", "$deleteFromPrimitiveList/finalizers",
                                                           "$setElementOrder/finalizers")])


def _pod_writes(events, ns: str, app: str) -> list[dict]:
    """The student's successful requests on the Pods of `app`: [{verb, name, touched}]; a DELETE
    touches the whole Pod."""
    out = []
    for e in _students(events):
        ref = e.get("objectRef") or {}
        if ref.get("resource") != "pods" or ref.get("namespace") != ns or not _ok(e) \
                or e.get("verb") not in ("update", "patch", "delete") or not (ref.get("name") or "").startswith(app + "-"):
            continue
        touched = ["the Pod (DELETE)"] if e["verb"] == "delete" else _touched(e["verb"], e.get("requestObject"))
        out.append({"verb": e["verb"], "name": ref["name"], "touched": touched})
    return out


def judge_stuck_finalizer(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["replicaset"]
    answer = ctx.answer()
    pod_name = str(ctx.answer_field(answer, "pod", str)).strip()
    finalizer = str(ctx.answer_field(answer, "finalizer", str)).strip()
    # a release that fails beside a right diagnosis is no wrong answer (run_check counts none)
    ctx.answer_not_wrong = (pod_name in obs["held"] and finalizer not in GC_FINALIZERS
                            and finalizer in {f for fs in obs["held"].values() for f in fs})
    if obs["writes"]:
        first = obs["writes"][0]
        return ctx.failed(f"you changed the ReplicaSet {name} by hand ({first['verb']}): its foregroundDeletion "
                          "finalizer is the garbage collector's to remove once no dependent blocks it; removing "
                          "it leaves the blocking Pod behind. Release what holds the Pod instead "
                          f"(`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected=f"no change to {name} but the garbage collector's",
                          observed=[f"{w['verb']} {w['kind']} {w['name']}" for w in obs["writes"]], observed_in=LIVE)
    if any(o["kind"] == "ReplicaSet" for o in obs["left"]):
        return ctx.failed(f"ReplicaSet {name} is still Terminating: its foreground deletion waits for a dependent "
                          f"that is still there. `labkit gc graph -n {ns}` shows which, and what keeps it",
                          expected="the ReplicaSet and its Pods gone",
                          observed=f"{len(obs['left'])} of {name}'s objects still there", observed_in=LIVE)
    if obs["left"]:
        return ctx.failed(f"{len(obs['left'])} Pod(s) of {name} are still there after the ReplicaSet went: every Pod "
                          f"of it must be gone (`labkit gc graph -n {ns}` shows what keeps them)",
                          expected="the ReplicaSet and its Pods gone",
                          observed=[o["name"] + (" (deleting)" if o["deleting"] else "") for o in obs["left"]],
                          observed_in=LIVE)
    # the unchanged part: only the holding finalizer is released; nothing else of the dependents
    # changes (cutting their ownerReferences frees the owner without releasing what holds the Pod)
    other = [w for w in obs.get("pod_writes") or [] if w["touched"]]
    if other:
        first = other[0]
        return ctx.failed(f"you changed Pod {first['name']} by hand beyond its finalizers ({first['verb']}: "
                          f"{', '.join(first['touched'])}): the task is to release only what holds the Pod; anything "
                          "else changes the situation (cutting a Pod's ownerReferences, say, lets the ReplicaSet go "
                          "while the Pod still holds its finalizer). `labkit gc graph -n "
                          f"{ns}` shows what holds what (`labkit reset gc {ctx.exercise.id}` to start over)",
                          expected="no change to the Pods but the release of the finalizer that holds one",
                          observed=[f"{w['verb']} Pod {w['name']}: {', '.join(w['touched'])}" for w in other],
                          observed_in=LIVE)
    held = obs["held"]
    truth = next(iter(held.items()), (None, []))
    right = {"pod": truth[0], "finalizer": truth[1][0] if truth[1] else None}
    expected = "the Pod that held a finalizer of its own, and that finalizer"
    if finalizer in GC_FINALIZERS:
        # a category error the prompt rules out (the holding finalizer is not the GC's): named, as
        # it says nothing of the value asked for, and nothing of the other part
        return ctx.failed(f"released correctly, but the diagnosis is wrong: {finalizer} is a finalizer of the garbage "
                          "collector's own, which it removes itself (here foregroundDeletion was the ReplicaSet's, "
                          "waiting for the Pod); what held things up is a finalizer the Pod carried of its own. Look "
                          "at the Pod's finalizers (`labkit gc log` names the dependent the ReplicaSet waited for)",
                          expected=expected, observed={"pod": pod_name, "finalizer": finalizer}, right_answer=right)
    wrong = [part for part, bad in (("pod", pod_name not in held),
                                    ("finalizer", finalizer not in {f for fs in held.values() for f in fs})) if bad]
    if wrong:
        # neither part named nor counted while the answer can earn its points: the ReplicaSet had
        # two Pods and the lab shows a few finalizers, so a verdict per part would let each be
        # tried in turn (CheckContext.grid_feedback)
        return ctx.failed("released correctly, but "
                          + ctx.grid_feedback(wrong, 2, "parts", noun="diagnosis",
                                              advice="`labkit gc log` names the dependent the ReplicaSet waited for, "
                                                     "and the audit log shows the finalizer your release removed"),
                          expected=expected, observed={"pod": pod_name, "finalizer": finalizer}, right_answer=right)
    if not obs["audit"]:
        return ctx.passed(f"ReplicaSet {name} and its Pods are gone, and you named what held them; "
                          + NO_LOG.format(what="how you released it"))
    return ctx.passed(f"Pod {pod_name}'s finalizer {finalizer} held up {name}'s foreground deletion; once it was "
                      "released the GC removed foregroundDeletion itself")


def check_stuck_finalizer(ctx):
    return judge_stuck_finalizer(ctx, observe_stuck_finalizer(ctx))
