"""Checks of the namespace lab.

The truth comes from the live API server (namespaces, their conditions, a dry-run create, every
namespaced resource type through discovery) and from its audit log (who sent which finalize
request) — never from answers stored here. On a real cluster (`labkit run namespace
--kubeconfig`) there is no audit log to read: the checks that need it say so and judge the live
state only.

Audit events count from when the exercise's namespace was last built (`labkit run`, `labkit
reset namespace EXERCISE`). Checks answer within about 2 s: where the namespace controller is
still at work they say so ("check again in a few seconds") instead of waiting for it. Feedback
on answers names the part that is wrong and where to look, never the right value (that goes
only into `right_answer`).
"""

import json
import re

from labkit.exercises import LIVE, CheckFailed, settle

CONTROLLER_USER = "system:serviceaccount:kube-system:namespace-controller"
_REMAINING = re.compile(r"^(\S+) has (\d+) resource instances$")
_HELD = re.compile(r"^(\S+) in (\d+) resource instances$")
NO_AUDIT = ("on a real cluster labkit has no audit log, so {what} could not be checked; judged by the live "
            "state only")


def _lab(env):
    """The lab's lab.py (target, client, original_uid)."""
    return env.lab.environment_module()


# -- live state --------------------------------------------------------------------------------

def _namespace(c, name):
    code, body = c.request("GET", f"/api/v1/namespaces/{name}")
    return body if code == 200 else None


def _audit(ctx):
    """The API server's audit events since the exercise's namespace was built; None on a real cluster."""
    return _lab(ctx.env).target(ctx.env).audit(since=ctx.ready_time)


def _finalize_requests(ctx, namespace):
    """Every successful PUT …/namespaces/<namespace>/finalize: (user, spec.finalizers sent, time);
    None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("name"), ref.get("subresource"), e.get("verb")) != \
                ("namespaces", namespace, "finalize", "update"):
            continue
        if (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        sent = ((e.get("requestObject") or {}).get("spec") or {}).get("finalizers") or []
        found.append({"user": (e.get("user") or {}).get("username", ""), "finalizers": list(sent),
                      "time": e.get("requestReceivedTimestamp", "")})
    return found


def _force_finalized(ctx, namespace):
    """finalize requests by anyone but the namespace controller that removed `kubernetes`; None
    on a real cluster (no audit log)."""
    requests = _finalize_requests(ctx, namespace)
    if requests is None:
        return None
    return [r for r in requests if r["user"] != CONTROLLER_USER and "kubernetes" not in r["finalizers"]]


def _stored_objects(c, namespace):
    """Every object stored under `namespace`, as <resource>[.<group>]/<name> (events excluded)."""
    found = c.discover()
    objects = {}
    for r in found.resources:
        if not r.namespaced or "list" not in r.verbs or found.preferred.get(r.group) != r.version:
            continue
        if (r.group, r.resource) == ("", "events"):
            continue
        code, body = c.request("GET", c.path(r.api_version, r.resource, namespace))
        if code != 200:
            continue
        for item in body.get("items") or []:
            key = f"{r.resource}.{r.group}/{item['metadata']['name']}" if r.group else \
                f"{r.resource}/{item['metadata']['name']}"
            objects[key] = item
    return objects


def _spec_edits(ctx, namespace) -> str:
    """A note when the student updated or patched the namespace itself since the exercise began."""
    events = _audit(ctx) or []
    edits = [e for e in events if (e.get("objectRef") or {}).get("resource") == "namespaces"
             and (e.get("objectRef") or {}).get("name") == namespace and not (e.get("objectRef") or {}).get("subresource")
             and e.get("verb") in ("update", "patch") and (e.get("user") or {}).get("username") != CONTROLLER_USER]
    if not edits:
        return ""
    verb = {"patch": "patched", "update": "updated"}[edits[-1]["verb"]]
    return (f". You {verb} the namespace itself: a normal update keeps spec.finalizers as they are "
            "(only the finalize subresource changes them)")


def _gone_cleanly(ctx, c, namespace):
    """The namespace the lab made is gone, emptied by the namespace controller (not forced).
    Returns a note when the audit log could not be read (a real cluster): then only the live
    state says it was not forced (nothing stayed behind in storage under its name)."""
    ns = _namespace(c, namespace)
    original = _lab(ctx.env).original_uid(ctx.env, namespace)
    if ns is not None and ns["metadata"]["uid"] == original:
        state = ns.get("status", {}).get("phase")
        held = [k for k, obj in _stored_objects(c, namespace).items() if obj["metadata"].get("finalizers")]
        why = (f"{len(held)} object(s) in it still carry finalizers: `labkit ns explain {namespace}` says which"
               if held or not ns["metadata"].get("deletionTimestamp") else
               "nothing in it carries a finalizer any more: the namespace controller removes it on one of its next "
               "passes (every 8 s at most): check again in a few seconds")
        raise CheckFailed(f"namespace {namespace} still exists ({state}); {why}" + _spec_edits(ctx, namespace))
    forced = _force_finalized(ctx, namespace)
    if forced:
        raise CheckFailed(f"namespace {namespace} was force-finalized by {forced[0]['user']} (PUT …/finalize with "
                          f"spec.finalizers {forced[0]['finalizers']}): that is not a fix — `labkit reset namespace` "
                          "and do it without touching the namespace's finalizers")
    left = _stored_objects(c, namespace)
    if left:
        raise CheckFailed(f"objects are still stored under {namespace}: {', '.join(sorted(left))}")
    return "" if forced is not None else " (" + NO_AUDIT.format(what="who finalized it") + ")"


# -- (a) conditions --------------------------------------------------------------------------

def _counts(condition, pattern, prefix):
    if not condition or condition.get("status") != "True":
        return {}
    text = condition.get("message", "")
    if not text.startswith(prefix):
        return {}
    counts = {}
    for part in text[len(prefix):].split(", "):
        m = pattern.match(part.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def _compare_counts(got: dict, truth: dict, what: str) -> list[str]:
    """What is wrong in the student's mapping of `what` to counts, without naming a right key
    the student did not write."""
    got = {str(k).strip(): v for k, v in got.items()}
    problems = []
    for key in sorted(set(got) - set(truth)):
        if f"{key}." in truth:
            problems.append(f"{what}: {key!r} needs a trailing dot: the condition writes <resource>.<group>, and "
                            "the core group is empty (`configmaps.`)")
        elif any(t.startswith(f"{key}.") for t in truth):
            problems.append(f"{what}: {key!r} needs its group, as the condition writes it: <resource>.<group>")
        else:
            problems.append(f"{what}: {key!r} is not among what the condition lists")
    wrong_counts = sorted(k for k in set(got) & set(truth) if got[k] != truth[k])
    if wrong_counts:
        problems.append(f"{what}: the count of {', '.join(wrong_counts)} is not the one in the condition")
    missing = len(set(truth) - set(got) - {k for k in truth if k.rstrip('.') in got or
                                           any(k.startswith(f"{g}.") for g in got)})
    if missing:
        problems.append(f"{what}: {missing} entr{'y' if missing == 1 else 'ies'} of the condition missing")
    return problems


def check_conditions(ctx):
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    ns = _namespace(c, name)
    if ns is None:
        raise CheckFailed(f"namespace {name} is gone, and its conditions with it: `labkit reset namespace "
                          f"{ctx.exercise.id}`, then delete it and read the conditions while it is Terminating")
    if not ns["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"namespace {name} is not being deleted: delete it first "
                          f"(kubectl delete namespace {name} --wait=false)")

    def conditions():
        current = _namespace(c, name) or {}
        pods = c.request("GET", f"/api/v1/namespaces/{name}/pods")[1].get("items") or []
        return len(pods), {x["type"]: x for x in (current.get("status") or {}).get("conditions") or []}

    seen = settle(conditions, timeout=1.5, stable_for=0.3)
    pods, by_type = seen.value
    if not seen.settled or pods or "NamespaceContentRemaining" not in by_type:
        raise CheckFailed(f"the namespace controller is still working on {name} (its first pass comes 5 s after the "
                          "DELETE, and pods go first): check again in a few seconds")
    remaining = _counts(by_type.get("NamespaceContentRemaining"), _REMAINING, "Some resources are remaining: ")
    held = _counts(by_type.get("NamespaceFinalizersRemaining"), _HELD,
                   "Some content in the namespace has finalizers remaining: ")
    data = ctx.answer()
    got_remaining = ctx.answer_field(data, "remaining", dict)
    got_held = ctx.answer_field(data, "finalizers", dict)
    problems = _compare_counts(got_remaining, remaining, "remaining") + _compare_counts(got_held, held, "finalizers")
    if problems:
        raise CheckFailed("\n".join(problems) + f"\nCompare with the conditions NamespaceContentRemaining and "
                          f"NamespaceFinalizersRemaining of namespace {name} (`kubectl get ns {name} -o yaml`)",
                          expected=f"the counts in namespace {name}'s conditions",
                          observed={"remaining": got_remaining, "finalizers": got_held},
                          right_answer={"remaining": remaining, "finalizers": held})
    return ctx.passed(f"right: {name} waits for " + ", ".join(f"{n} {k}" for k, n in remaining.items())
                      + " held by " + ", ".join(held))


# -- (b) create in a Terminating namespace -----------------------------------------------------

def _normalize(text):
    text = str(text).strip().strip("'\"")
    for prefix in ("Error from server (Forbidden): ", "error: failed to create configmap: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return " ".join(text.split())


def check_terminating_create(ctx):
    name, cm = ctx.params["namespace"], ctx.params["configmap"]
    c = _lab(ctx.env).client(ctx.env)
    code, body = c.request("POST", f"/api/v1/namespaces/{name}/configmaps", {"dryRun": "All"},
                           body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm}})
    if code < 300:
        raise CheckFailed(f"namespace {name} accepts new content now (it is no longer Terminating): "
                          "`labkit reset namespace` to get it back")
    truth = body.get("message", "")
    answer = ctx.answer_field(ctx.answer(), "error", str)
    if _normalize(answer) != _normalize(truth):
        hint = "the HTTP status is 403 (Forbidden)" if "forbidden" not in answer.lower() else \
            "close, but not the exact message"
        raise CheckFailed(f"that is not what the API server answers ({hint})",
                          expected="the message of the API server's answer", observed=answer, right_answer=truth)
    return ctx.passed(f"right: {code} {body.get('reason')}: {truth}")


# -- (c) release the custom resource's finalizer ---------------------------------------------

def check_release_finalizer(ctx):
    name = ctx.params["namespace"]
    note = _gone_cleanly(ctx, _lab(ctx.env).client(ctx.env), name)
    return ctx.passed(f"namespace {name} emptied itself and went away; its kubernetes finalizer was removed by the "
                      "namespace controller, not by hand" + note)


# -- (d) unavailable APIService --------------------------------------------------------------

def _discovery_failures_written(ctx, namespace):
    """The message of the first NamespaceDeletionDiscoveryFailure the namespace controller wrote
    into `namespace`'s status; None if it never did; NO_AUDIT on a real cluster."""
    events = _audit(ctx)
    if events is None:
        return NO_AUDIT
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("name"), ref.get("subresource")) != ("namespaces", namespace, "status"):
            continue
        if (e.get("user") or {}).get("username") != CONTROLLER_USER:
            continue
        for cond in ((e.get("requestObject") or {}).get("status") or {}).get("conditions") or []:
            if cond.get("type") == "NamespaceDeletionDiscoveryFailure" and cond.get("status") == "True":
                return cond.get("message", "")
    return None


# what each of kube-aggregator's reasons means for the student (availability.py lists the checks)
UNAVAILABLE = {
    "ServiceNotFound": "its Service is missing",
    "ServicePortError": "its Service does not offer the APIService's port",
    "EndpointsNotFound": "its Service has no EndpointSlices (a Service without a selector gets none), so no ready "
                         "endpoints",
    "MissingEndpoints": "its Service has no ready endpoints: no ready Pod behind its selector has the port the "
                        "Service names",
    "FailedDiscoveryCheck": "its backend does not answer discovery through the Service: the endpoints lead nowhere "
                            "that serves the API",
}


def _apiservice_condition(c, apiservice):
    """The settled Available condition of `apiservice` (None: it does not exist, {}: no condition yet)."""
    def probe():
        code, svc = c.request("GET", f"/apis/apiregistration.k8s.io/v1/apiservices/{apiservice}")
        if code == 404:
            return None
        cond = next((x for x in (svc.get("status") or {}).get("conditions") or [] if x.get("type") == "Available"), {})
        return {k: cond.get(k) for k in ("status", "reason", "message")}
    return settle(probe, timeout=10, stable_for=1.0).value


def _require_available(c, apiservice, namespace):
    cond = _apiservice_condition(c, apiservice)
    if cond is None or cond.get("status") == "True":
        return cond
    reason = cond.get("reason") or "no condition yet"
    words = UNAVAILABLE.get(reason, "see its conditions")
    raise CheckFailed(f"APIService {apiservice} is not Available ({reason}): {words}. Discovery of its group keeps "
                      f"failing, so namespace {namespace} (and every other namespace being deleted) keeps waiting "
                      f"— `kubectl get apiservice {apiservice} -o yaml`",
                      observed=f"{reason}: {cond.get('message')}")


def check_broken_apiservice(ctx):
    name, apiservice = ctx.params["namespace"], ctx.params["apiservice"]
    c = _lab(ctx.env).client(ctx.env)
    ns = _namespace(c, name)
    if ns is not None and ns["metadata"]["uid"] == _lab(ctx.env).original_uid(ctx.env, name) \
            and not ns["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"namespace {name} has not been deleted yet: break the API and delete it (see the prompt)")
    failure = _discovery_failures_written(ctx, name)
    if failure is None and ns is not None:
        raise CheckFailed(f"namespace {name} never waited for a failing discovery: delete the Service "
                          "kube-system/metrics-server before you delete the namespace")
    if failure is None:
        raise CheckFailed(f"namespace {name} went away without ever waiting for a failing discovery: "
                          "`labkit reset namespace` and break the API first (see the prompt)")
    cond = _require_available(c, apiservice, name)
    _gone_cleanly(ctx, c, name)
    note = " (" + NO_AUDIT.format(what="the discovery failure it waited for") + ")" if failure is NO_AUDIT else ""
    return ctx.passed(f"namespace {name} finished once discovery worked again"
                      + (f" (APIService {apiservice} deleted)" if cond is None else f" ({apiservice} Available again)")
                      + note)


# -- (e) force-finalize ----------------------------------------------------------------------

def check_force_finalize(ctx):
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    forced = _force_finalized(ctx, name)
    not_yet = (f"namespace {name} has not been force-finalized yet (PUT /api/v1/namespaces/{name}/finalize "
               "with empty spec.finalizers)")
    if forced is not None and not forced:
        raise CheckFailed(not_yet)
    ns = _namespace(c, name)
    original = ns is not None and ns["metadata"]["uid"] == _lab(ctx.env).original_uid(ctx.env, name)
    if forced is None and original:
        raise CheckFailed(not_yet)
    objects = _stored_objects(c, name)
    if forced is not None:
        # objects created up to the second of the force-finalize (audit times have microseconds)
        when = forced[0]["time"]
        left = sorted(k for k, obj in objects.items() if obj["metadata"].get("creationTimestamp", "")[:19] <= when[:19])
    elif ns is not None:
        # no audit log (a real cluster): what was created before the namespace of the same name came back
        when = ns["metadata"]["creationTimestamp"]
        left = sorted(k for k, obj in objects.items() if obj["metadata"].get("creationTimestamp", "")[:19] < when[:19])
    else:
        left = sorted(objects)
    recreated = ns is not None and not original
    if not recreated:
        raise CheckFailed(f"create the namespace {name} again and look at it before you answer")
    if forced is None and not left:
        raise CheckFailed(f"nothing outlived the old namespace {name}: it went away the normal way, not "
                          f"force-finalized ({NO_AUDIT.format(what='the finalize request')})")
    data = ctx.answer()
    got = ctx.answer_field(data, "left_behind", list)
    visible = ctx.answer_field(data, "visible_again", bool)
    got = sorted(str(x).strip() for x in got)
    right = {"left_behind": left, "visible_again": bool(left)}
    if got != left:
        parts, named = [], set()
        for entry in sorted(set(got) - set(left)):
            resource, _, obj = entry.partition("/")
            grouped = [k for k in left if k.startswith(f"{resource}.") and k.endswith(f"/{obj}")]
            named.update(grouped)
            if not obj:
                parts.append(f"{entry!r}: write <resource>/<name> (core group) or <resource>.<group>/<name>")
            elif grouped:
                parts.append(f"{entry}: the resource {resource} is not in the core group: write "
                             "<resource>.<group>/<name> (`kubectl api-resources` shows its group)")
            else:
                parts.append(f"{entry}: not stored under {name} (or created after the force-finalize)")
        missing = len(set(left) - set(got) - named)
        if missing:
            parts.append(f"{missing} left-behind object(s) missing from your list: look at every namespaced "
                         f"resource type (`kubectl api-resources --namespaced`), not only the built-in kinds")
        raise CheckFailed("left_behind: " + "\n".join(parts), expected=f"every object still stored under {name}",
                          observed=got, right_answer=right)
    truth_visible = bool(left)
    if visible != truth_visible:
        raise CheckFailed(f"visible_again: look at the new namespace {name} again (kubectl get all,cm,backups -n {name})",
                          expected=f"whether the new namespace {name} shows them", observed=visible,
                          right_answer=right)
    return ctx.passed(f"right: {len(left)} object(s) outlived namespace {name} and reappear in the namespace of the "
                      "same name — nothing will ever delete them, and their finalizers' cleanup never ran")


# -- (f) own finalizer -----------------------------------------------------------------------

def check_own_finalizer(ctx):
    name = ctx.params["namespace"]
    c = _lab(ctx.env).client(ctx.env)
    requests = _finalize_requests(ctx, name)
    if requests is None:
        return _own_finalizer_live(ctx, c, name)
    requests = [r for r in requests if r["user"] != CONTROLLER_USER]
    added = next((i for i, r in enumerate(requests) if any(f != "kubernetes" for f in r["finalizers"])), None)
    if added is None:
        raise CheckFailed(f"no finalizer of your own was put on {name} through the finalize subresource yet"
                          + _spec_edits(ctx, name))
    mine = [f for f in requests[added]["finalizers"] if f != "kubernetes"]
    if not any(set(mine).isdisjoint(r["finalizers"]) for r in requests[added + 1:]):
        raise CheckFailed(f"you added {', '.join(mine)}; now remove it again (through the same subresource)")
    ns = _namespace(c, name)
    if ns is None or ns["metadata"]["uid"] != _lab(ctx.env).original_uid(ctx.env, name):
        raise CheckFailed(f"namespace {name} is not the lab's any more: `labkit reset namespace`")
    spec = (ns.get("spec") or {}).get("finalizers") or []
    if spec != ["kubernetes"] or ns["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"leave {name} as it was: Active with spec.finalizers [kubernetes]",
                          expected=["kubernetes"], observed=spec)
    return ctx.passed(f"added and removed {', '.join(mine)} through PUT …/namespaces/{name}/finalize")




def _own_finalizer_live(ctx, c, name):
    """(f) without an audit log (a real cluster): the namespace is the lab's, Active with
    spec.finalizers [kubernetes] again, and was written since the lab built it (each finalize
    request gives it a new resourceVersion). Weaker than the audit log: any other write to the
    namespace (a label) would count too, and the message says so."""
    ns = _namespace(c, name)
    if ns is None or ns["metadata"]["uid"] != _lab(ctx.env).original_uid(ctx.env, name):
        raise CheckFailed(f"namespace {name} is not the lab's any more: `labkit reset namespace`")
    spec = (ns.get("spec") or {}).get("finalizers") or []
    if spec != ["kubernetes"]:
        raise CheckFailed(f"spec.finalizers of {name} is {spec}: remove your finalizer again (through the same "
                          "subresource)", expected=["kubernetes"], observed=spec)
    if ns["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"leave {name} as it was: Active with spec.finalizers [kubernetes]")
    if ns["metadata"].get("resourceVersion") == _lab(ctx.env).built_resource_version(ctx.env, name):
        raise CheckFailed(f"namespace {name} has not been changed since the lab built it: add a finalizer of your "
                          "own through the finalize subresource, then remove it")
    return ctx.passed(f"{name} was changed and is back to spec.finalizers [kubernetes] ("
                      + NO_AUDIT.format(what="which requests changed it") + ")")


# -- (g) a volume's Pod on a dead node ---------------------------------------------------------

PODGC_USER = "system:serviceaccount:kube-system:pod-garbage-collector"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"


def _student_writes(ctx, resource, namespace, name, verbs):
    """Successful requests of `verbs` on `resource` namespace/name by anyone but a component of the
    cluster (users named system:...); None on a real cluster (no audit log)."""
    events = _audit(ctx)
    if events is None:
        return None
    found = []
    for e in events:
        ref = e.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name"), ref.get("subresource")) != \
                (resource, namespace, name, None) or e.get("verb") not in verbs:
            continue
        user = (e.get("user") or {}).get("username", "")
        if user.startswith("system:") or (e.get("responseStatus") or {}).get("code", 0) >= 300:
            continue
        found.append({"user": user, "verb": e["verb"], "request": e.get("requestObject")})
    return found


def check_volume_in_use(ctx):
    name, node_name, claim, pod_name = (ctx.params[k] for k in ("namespace", "node", "claim", "pod"))
    c = _lab(ctx.env).client(ctx.env)
    edits = _student_writes(ctx, "persistentvolumeclaims", name, claim, ("patch", "update"))
    touched = [e for e in edits or [] if "finalizers" in json.dumps(e["request"] or {})]
    if touched:
        raise CheckFailed(f"{touched[0]['user']} changed the finalizers of PVC {claim} by hand: "
                          "kubernetes.io/pvc-protection keeps a claim while a Pod still uses it, and its controller "
                          "removes it itself once no Pod does — `labkit reset namespace` and leave it to it")
    deletes = _student_writes(ctx, "pods", name, pod_name, ("delete",))
    forced = [e for e in deletes or [] if (e["request"] or {}).get("gracePeriodSeconds") == 0]
    if forced:
        raise CheckFailed(f"{forced[0]['user']} force-deleted Pod {pod_name} (grace period 0): the API server "
                          f"forgets it at once, although nothing confirmed that {node_name} stopped it and released "
                          f"the volume — `labkit reset namespace` and tell Kubernetes about the node instead")
    pod = c.get_or_none("v1", "pods", pod_name, name)
    if pod is not None and pod["metadata"].get("uid"):
        node = c.get_or_none("v1", "nodes", node_name) or {}
        taints = [t.get("key") for t in (node.get("spec") or {}).get("taints") or []]
        extra = ""
        if (node.get("spec") or {}).get("unschedulable"):
            extra = (f" {node_name} is cordoned, which only keeps new Pods from being scheduled there; it does not "
                     "end the Pods it had.")
        elif OUT_OF_SERVICE in taints:
            extra = " (the pod garbage collector looks every 20 s: check again shortly)"
        raise CheckFailed(f"Pod {pod_name} is still Terminating on {node_name}, whose kubelet will never confirm "
                          f"it stopped, and namespace {name} deletes pods first.{extra}")
    note = _gone_cleanly(ctx, c, name)
    deleted_by = [e for e in (_audit(ctx) or []) if (e.get("objectRef") or {}).get("resource") == "pods"
                  and (e.get("objectRef") or {}).get("name") == pod_name and e.get("verb") == "delete"
                  and (e.get("user") or {}).get("username") == PODGC_USER]
    who = "the pod garbage collector deleted it" if deleted_by else "it is gone"
    return ctx.passed(f"{pod_name} no longer holds {name}: {who}, the claim's protection was released by its "
                      f"controller, and the namespace emptied itself" + note)
