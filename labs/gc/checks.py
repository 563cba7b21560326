"""Checks of the gc lab. Truth comes from live objects, from the API server's audit log (how
the student deleted: which verb, which propagationPolicy, in which order the requests came) and
from the garbage collector's decision log. On a real cluster (`labkit run gc --kubeconfig`)
there is neither log: those checks say so and judge the final state only."""

from __future__ import annotations

import calendar
import time

import yaml

from labkit.apiserver.errors import ApiError
from labkit.exercises import CheckFailed, settle, wait_for
from labkit.apiserver.target import for_env

KINDS = {"deployments": "Deployment", "replicasets": "ReplicaSet", "pods": "Pod"}
NO_LOG = ("on a real cluster labkit has no audit log or GC decision log, so {what} could not be checked; "
          "judged by the final state only")


# -- helpers ---------------------------------------------------------------------------------------

def _lab(ctx):
    return ctx.lab.environment_module()


def _ts(stamp: str) -> float:
    """audit.k8s.io timestamps (2026-01-02T03:04:05.123456Z) as seconds since the epoch."""
    main, _, frac = stamp.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)


def _since_ready(ctx, target) -> list[dict] | None:
    """Audit events received after the starting state was complete (None on a real cluster)."""
    events = target.audit()
    if events is None:
        return None
    ready = _lab(ctx).ready_time(ctx.env)
    return [e for e in events if _ts(e.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z")) >= ready]


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


def _student_delete(ctx, events, resource: str, name: str, what: str) -> dict:
    deletes = [e for e in _students(events) if e["verb"] == "delete" and _on(e, resource, name) and _ok(e)]
    if not deletes:
        raise CheckFailed(f"the audit log has no DELETE of {what} after the lab started: delete it yourself "
                          "(kubectl delete ...), so that the check can see how")
    return deletes[0]


def _gone(probe, timeout: float = 15.0):
    """Wait (briefly) for what `probe` lists to be empty: the lab's Pods take their grace period to go."""
    return [] if wait_for(lambda: not probe(), timeout=timeout, interval=0.2) else probe()


def _describe_left(objs: list[dict]) -> list[str]:
    out = []
    for o in objs:
        meta = o["metadata"]
        state = []
        if meta.get("deletionTimestamp"):
            state.append("deleting")
        if meta.get("finalizers"):
            state.append("finalizers " + ",".join(meta["finalizers"]))
        out.append(f"{o.get('kind', '')} {meta['name']}" + (f" ({'; '.join(state)})" if state else ""))
    return out


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

def check_owner_chain(ctx):
    p = ctx.params
    answer = ctx.answer()
    pod_name = ctx.answer_field(answer, "pod", str)
    rs_uid = str(ctx.answer_field(answer, "replicaset", str)).strip()
    dep_uid = str(ctx.answer_field(answer, "deployment", str)).strip()
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
    else:
        reason = "follow ownerReferences from the Pod to its ReplicaSet, then from the ReplicaSet to the Deployment"
    return ctx.failed(f"wrong UID for {' and '.join(wrong)}: {reason}",
                      expected="the UIDs in the ownerReferences chain", observed={k: given[k] for k in wrong})


# -- (b) background ---------------------------------------------------------------------------------

def _order_answer(ctx, answer, key):
    value = ctx.answer_field(answer, key, list)
    kinds = [str(v).strip() for v in value]
    if sorted(kinds) != sorted(KINDS.values()):
        raise CheckFailed(f"{ctx.answer_path}: {key}: list each of Deployment, ReplicaSet, Pod once, got {value}")
    return kinds


def check_background_delete(ctx):
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    answer = ctx.answer()
    order = _order_answer(ctx, answer, "order")
    target = for_env(ctx.env)
    client = target.client()
    if client.get_or_none("apps/v1", "deployments", name, ns) is not None:
        raise CheckFailed(f"the Deployment {name} is still there: delete it (`kubectl delete deployment {name} -n {ns}`)")
    events = _since_ready(ctx, target)
    if events is not None:
        policy = _policy(_student_delete(ctx, events, "deployments", name, f"Deployment {name}"))
        if policy not in ("Background", "default"):
            return ctx.failed(f"you deleted Deployment {name} with propagationPolicy {policy}: this exercise is about "
                              "background deletion (kubectl's default, --cascade=background); `labkit reset gc` "
                              "brings it back", expected="Background", observed=policy)
    left = _gone(lambda: _chain(client, ns, name))
    if left:
        deleting = all(o["metadata"].get("deletionTimestamp") for o in left)
        return ctx.failed(("its dependents are still being deleted, check again in a few seconds" if deleting else
                           "its ReplicaSet or Pods are still there, not being deleted: were they orphaned?"),
                          expected="Deployment, ReplicaSet and Pods gone", observed=_describe_left(left))
    if events is None:
        return ctx.passed("Deployment, ReplicaSet and Pods are gone; " + NO_LOG.format(what="the order of deletion"))
    firsts = {}
    for e in events:
        if e["verb"] != "delete" or not _ok(e):
            continue
        for resource, kind in KINDS.items():
            if kind not in firsts and _on(e, resource, name if resource == "deployments" else None,
                                          prefix=None if resource == "deployments" else f"{name}-"):
                firsts[kind] = _ts(e["requestReceivedTimestamp"])
    truth = sorted(firsts, key=firsts.get)
    if set(truth) != set(KINDS.values()):
        return ctx.error(f"the audit log shows DELETE requests for {truth} only")
    if order != truth:
        return ctx.failed("that is not the order of the DELETE requests: with Background the owner goes first and "
                          "the garbage collector deletes what it owned afterwards (`labkit gc log`)",
                          expected="the order in the audit log", observed=order)
    return ctx.passed(f"background deletion: {' → '.join(truth)} (DELETE requests in the audit log); "
                      "the owner went at once, the GC deleted its dependents afterwards")


# -- (c) foreground ---------------------------------------------------------------------------------

def check_foreground_delete(ctx):
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    answer = ctx.answer()
    finalizer = str(ctx.answer_field(answer, "finalizer", str)).strip()
    last = str(ctx.answer_field(answer, "last", str)).strip()
    if last not in KINDS.values():
        raise CheckFailed(f"{ctx.answer_path}: last: one of Deployment, ReplicaSet, Pod, got {last!r}")
    target = for_env(ctx.env)
    client = target.client()
    dep = client.get_or_none("apps/v1", "deployments", name, ns)
    if dep is not None and not dep["metadata"].get("deletionTimestamp"):
        raise CheckFailed(f"the Deployment {name} is still there: delete it with --cascade=foreground")
    events = _since_ready(ctx, target)
    if events is not None:
        policy = _policy(_student_delete(ctx, events, "deployments", name, f"Deployment {name}"))
        if policy != "Foreground":
            return ctx.failed(f"you deleted Deployment {name} with propagationPolicy {policy}, not Foreground: the "
                              "owner did not wait for its dependents (`labkit reset gc` and try "
                              "`--cascade=foreground`)", expected="Foreground", observed=policy)
    left = _gone(lambda: ([dep] if client.get_or_none("apps/v1", "deployments", name, ns) else []) + _chain(client, ns, name))
    if left:
        return ctx.failed("the foreground deletion has not finished yet: check again in a few seconds",
                          expected="Deployment, ReplicaSet and Pods gone", observed=_describe_left(left))
    if events is None:
        return ctx.passed("the Deployment and its dependents are gone; " + NO_LOG.format(what="the finalizer and the order"))
    # the finalizer: what the GC removed from the Deployment when no dependent blocked it any more
    removed = [d.get("finalizer") for d in target.decisions() or []
               if d.get("action") == "remove-finalizer" and (d.get("item") or {}).get("kind") == "Deployment"
               and d["item"].get("name") == name and d["item"].get("namespace") == ns]
    # the last object removed: the last successful write to the chain (removals are writes too:
    # the node's final DELETE of a Pod, the GC's update that drops an owner's last finalizer)
    writes = [e for e in events if e["verb"] in ("delete", "update", "patch") and _ok(e)
              and (_on(e, "deployments", name) or _on(e, "replicasets", prefix=f"{name}-")
                   or _on(e, "pods", prefix=f"{name}-"))]
    truth_last = KINDS[writes[-1]["objectRef"]["resource"]] if writes else None
    problems = []
    if finalizer not in removed:
        problems.append(f"the Deployment waited with the finalizer {removed[-1] if removed else '?'!r}, not {finalizer!r}")
    if last != truth_last:
        problems.append(f"the last object removed was a {truth_last} (the last write to the chain in the audit log), "
                        f"not a {last}")
    if problems:
        return ctx.failed("; ".join(problems), expected={"finalizer": removed[-1] if removed else None, "last": truth_last},
                          observed={"finalizer": finalizer, "last": last})
    return ctx.passed(f"foreground deletion: the Deployment waited with {finalizer} while its dependents went, "
                      f"and was removed last")


# -- (d) orphan and adopt ---------------------------------------------------------------------------

def check_orphan_adopt(ctx):
    p = ctx.params
    ns, old, new = p["namespace"], p["replicaset"], p["new_replicaset"]
    target = for_env(ctx.env)
    client = target.client()
    rs = client.get_or_none("apps/v1", "replicasets", old, ns)
    if rs is not None:
        raise CheckFailed(f"the ReplicaSet {old} is still there" + (" (being deleted: check again in a moment)"
                          if rs["metadata"].get("deletionTimestamp") else ": delete it without its Pods"))
    events = _since_ready(ctx, target)
    if events is not None:
        policy = _policy(_student_delete(ctx, events, "replicasets", old, f"ReplicaSet {old}"))
        if policy != "Orphan":
            return ctx.failed(f"you deleted ReplicaSet {old} with propagationPolicy {policy}: its Pods went with it "
                              "(`labkit reset gc`, then --cascade=orphan)", expected="Orphan", observed=policy)
        killed = sorted({e["objectRef"]["name"] for e in events
                         if e["verb"] == "delete" and _ok(e) and _on(e, "pods", prefix=f"{old}-")})
        if killed:
            return ctx.failed(f"Pods of {old} were deleted: {', '.join(killed)}; the new ReplicaSet must adopt the "
                              "old Pods, not replace them", expected="no Pod deleted", observed=killed)
    new_rs = client.get_or_none("apps/v1", "replicasets", new, ns)
    if new_rs is None:
        raise CheckFailed(f"there is no ReplicaSet {new} in {ns} yet: create it with the selector app={old}")

    def owners():
        pods = [q for q in client.list("v1", "pods", ns, label_selector=f"app={old}")[0]
                if not q["metadata"].get("deletionTimestamp")]
        return sorted((q["metadata"]["name"], (_controller_ref(q) or {}).get("uid")) for q in pods)
    state = settle(owners, timeout=10, stable_for=0.5).value
    uid = new_rs["metadata"]["uid"]
    strays = [name for name, owner in state if owner != uid]
    if strays or len(state) != (new_rs.get("spec") or {}).get("replicas", 1):
        return ctx.failed(f"the Pods labelled app={old} are not all controlled by {new}",
                          expected=f"{new_rs['spec'].get('replicas')} Pods with controller {new} ({uid[:8]})",
                          observed=[f"{n}: {'controller ' + o[:8] if o else 'no controller'}" for n, o in state])
    if events is None:
        born = new_rs["metadata"]["creationTimestamp"]
        newer = [q["metadata"]["name"] for q in client.list("v1", "pods", ns, label_selector=f"app={old}")[0]
                 if q["metadata"]["creationTimestamp"] > born]
        if newer:
            return ctx.failed(f"Pods {newer} were created after {new}: they replaced the old ones")
        return ctx.passed(f"{new} controls the Pods, which are older than it; " + NO_LOG.format(what="the policy used"))
    made = sorted({e["objectRef"].get("name", "") for e in events if e["verb"] == "create" and _ok(e)
                   and _on(e, "pods", prefix="")
                   and e.get("user", {}).get("username", "").endswith("replicaset-controller")
                   and (e.get("requestObject") or {}).get("metadata", {}).get("labels", {}).get("app") == old})
    if made:
        return ctx.failed(f"the ReplicaSet controller created new Pods for app={old} after the lab started: "
                          "some were replaced, not adopted", observed=made)
    return ctx.passed(f"{old}'s Pods were orphaned (Orphan) and {new} adopted the same {len(state)} Pods")


# -- (e) blockOwnerDeletion -------------------------------------------------------------------------

def check_unblocking_dependent(ctx):
    p = ctx.params
    ns, owner, dep_name, fin = p["namespace"], p["owner"], p["dependent"], p["finalizer"]
    target = for_env(ctx.env)
    client = target.client()
    cm = client.get_or_none("v1", "configmaps", owner, ns)
    dep = client.get_or_none("v1", "secrets", dep_name, ns)
    if dep is None or fin not in (dep["metadata"].get("finalizers") or []):
        return ctx.failed(f"Secret {dep_name} " + ("is gone" if dep is None else f"lost its finalizer {fin}")
                          + ": its finalizer was removed; the task was to keep it and stop the Secret from "
                          "blocking its owner (`labkit reset gc` to start over)",
                          expected=f"{dep_name} still there with {fin}", observed="gone" if dep is None else
                          dep["metadata"].get("finalizers"))
    if cm is not None:
        if cm["metadata"].get("deletionTimestamp"):
            refs = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("uid") == cm["metadata"]["uid"]]
            return ctx.failed(f"ConfigMap {owner} is waiting (foregroundDeletion) for its dependent {dep_name}, "
                              "whose owner reference blocks it", expected="blockOwnerDeletion false or unset",
                              observed=refs)
        raise CheckFailed(f"ConfigMap {owner} is still there: delete it with --cascade=foreground")
    events = _since_ready(ctx, target)
    if events is not None:
        policy = _policy(_student_delete(ctx, events, "configmaps", owner, f"ConfigMap {owner}"))
        if policy != "Foreground":
            return ctx.failed(f"you deleted {owner} with propagationPolicy {policy}: without Foreground the owner "
                              "goes at once whatever blockOwnerDeletion says (`labkit reset gc`)",
                              expected="Foreground", observed=policy)
        stripped = [e for e in _students(events) if e["verb"] in ("update", "patch") and _ok(e)
                    and _on(e, "secrets", dep_name) and "ownerReferences" in str(e.get("requestObject"))
                    and owner not in str(e.get("requestObject"))]
    else:
        stripped = []
    kept = [r for r in dep["metadata"].get("ownerReferences") or [] if r.get("name") == owner]
    if not kept and not dep["metadata"].get("deletionTimestamp"):
        return ctx.failed(f"{dep_name} no longer names {owner} as its owner: keep the reference, change only "
                          "blockOwnerDeletion", observed=dep["metadata"].get("ownerReferences"))
    if stripped and not dep["metadata"].get("deletionTimestamp"):
        return ctx.failed(f"you removed {dep_name}'s owner reference instead of unblocking it")
    if events is None:
        return ctx.passed(f"ConfigMap {owner} is gone while {dep_name} still holds {fin} and names it as owner; "
                          + NO_LOG.format(what="the propagation policy you used"))
    return ctx.passed(f"ConfigMap {owner} went in the foreground while {dep_name} still holds {fin}: a dependent "
                      "without blockOwnerDeletion does not hold up its owner")


# -- (f) predict dangling owners ---------------------------------------------------------------------

FATES = ("deleted", "kept")


def _experiment(ctx, client):
    """Create the experiment's objects with a fresh suffix; return {base name: live name}, the
    namespaces and what the GC did."""
    p = ctx.params
    docs = [d for d in yaml.safe_load_all((ctx.lab.directory / p["experiment"]).read_text()) if d]
    suffix = f"{int(time.time() * 1000) % 10**8:08d}"
    uids = {}
    made = []
    try:
        for doc in docs:
            meta = doc["metadata"]
            base, ns = meta["name"], meta["namespace"]
            obj = {"metadata": {"name": f"{base}-{suffix}"}}
            refs = []
            for ref in meta.get("ownerReferences") or []:
                ref = dict(ref)
                if ref["uid"].startswith("${"):
                    ref["uid"] = uids[ref["uid"][2:-5]]      # ${anchor-b.uid}
                    ref["name"] = f"{ref['name']}-{suffix}"
                refs.append(ref)
            if refs:
                obj["metadata"]["ownerReferences"] = refs
            created = client.create("v1", "configmaps", obj, ns)
            made.append((ns, obj["metadata"]["name"]))
            uids[f"{base}-{ns[-1]}"] = created["metadata"]["uid"]
        ns = p["namespace"]

        def snapshot():
            out = {}
            for base in ("orphan", "shared", "stranger"):
                obj = client.get_or_none("v1", "configmaps", f"{base}-{suffix}", ns)
                out[base] = None if obj is None or obj["metadata"].get("deletionTimestamp") else \
                    tuple(sorted(r["name"].rsplit("-", 1)[0] for r in obj["metadata"].get("ownerReferences") or []))
            return out
        wait_for(lambda: snapshot()["orphan"] is None, timeout=30, interval=0.2)
        state = settle(snapshot, timeout=30, stable_for=1).value
        events = [e for e in client.list("v1", "events", ns)[0]
                  if (e.get("involvedObject") or {}).get("name") == f"stranger-{suffix}" and e.get("type") == "Warning"]
        return state, sorted({e.get("reason") for e in events})
    finally:
        for ns_, name in made:
            try:
                client.delete("v1", "configmaps", name, ns_)
            except ApiError:
                pass


def check_predict_dangling(ctx):
    answer = ctx.answer()
    given = {}
    for key in ("orphan", "shared", "stranger"):
        value = str(ctx.answer_field(answer, key, str)).strip().lower()
        if value not in FATES:
            raise CheckFailed(f"{ctx.answer_path}: {key}: write deleted or kept, got {value!r}")
        given[key] = value
    shared_owners = sorted(str(v) for v in ctx.answer_field(answer, "shared_owners", list))
    event = str(ctx.answer_field(answer, "stranger_event", str)).strip()
    client = for_env(ctx.env).client()
    state, reasons = _experiment(ctx, client)
    truth = {k: "deleted" if v is None else "kept" for k, v in state.items()}
    truth_owners = sorted(state["shared"] or ())
    truth_event = reasons[0] if reasons else "none"
    wrong = {k: given[k] for k in truth if given[k] != truth[k]}
    if truth["shared"] == "kept" and given["shared"] == "kept" and shared_owners != truth_owners:
        wrong["shared_owners"] = shared_owners
    if event.lower() != truth_event.lower() and not (truth_event == "none" and event.lower() in ("", "none")):
        wrong["stranger_event"] = event
    observed = {**truth, "shared_owners": truth_owners, "stranger_event": truth_event}
    if wrong:
        return ctx.failed(f"the garbage collector did otherwise for {', '.join(wrong)}: the GC GETs each owner "
                          "by name in the dependent's own namespace and compares UIDs; absent means dangling, and an object "
                          "is deleted only when no owner is solid", expected=observed, observed=wrong)
    return ctx.passed("your prediction is what the garbage collector did to freshly created objects",
                      observed=observed)


# -- (g) stuck finalizer ------------------------------------------------------------------------------

def check_stuck_finalizer(ctx):
    p = ctx.params
    ns, name = p["namespace"], p["replicaset"]
    answer = ctx.answer()
    pod_name = str(ctx.answer_field(answer, "pod", str)).strip()
    finalizer = str(ctx.answer_field(answer, "finalizer", str)).strip()
    target = for_env(ctx.env)
    client = target.client()
    events = _since_ready(ctx, target)
    if events is not None:
        forced = [e for e in _students(events) if e["verb"] in ("update", "patch") and _ok(e)
                  and _on(e, "replicasets", name)]
        if forced:
            return ctx.failed(f"you changed the ReplicaSet {name} by hand ({forced[0]['verb']}): its foregroundDeletion "
                              "finalizer is the garbage collector's to remove once no dependent blocks it; removing "
                              "it leaves the blocking Pod behind. Release the Pod's own finalizer instead "
                              "(`labkit reset gc` to start over)")
    rs = client.get_or_none("apps/v1", "replicasets", name, ns)
    left = _gone(lambda: _chain(client, ns, name), timeout=10)
    if rs is not None or left:
        return ctx.failed(f"ReplicaSet {name} is still Terminating: its foreground deletion waits for its dependents",
                          expected="the ReplicaSet and its Pods gone",
                          observed=_describe_left(([dict(rs, kind="ReplicaSet")] if rs else []) +
                                                  [o for o in left if o["kind"] == "Pod"]))
    if events is None:
        return ctx.passed(f"ReplicaSet {name} and its Pods are gone; " + NO_LOG.format(what="your diagnosis"))
    # who held it: the Pod whose finalizer list the audit log shows being given a finalizer of its own
    gc_finalizers = ("orphan", "foregroundDeletion")
    held = {}
    for e in target.audit() or []:
        if e["verb"] in ("patch", "update", "create") and _ok(e) and _on(e, "pods", prefix=f"{name}-"):
            body = e.get("requestObject")
            if not isinstance(body, dict):      # a JSON patch (a list of operations)
                continue
            extra = [f for f in (body.get("metadata") or {}).get("finalizers") or [] if f not in gc_finalizers]
            if extra:
                held[e["objectRef"]["name"]] = extra
    wrong = []
    if pod_name not in held:
        wrong.append(f"pod: {pod_name!r} is not the Pod that held a finalizer")
    elif finalizer not in held[pod_name]:
        wrong.append(f"finalizer: {finalizer!r} is not the one that held things up"
                     + (" (foregroundDeletion was the ReplicaSet's, waiting for the Pod)"
                        if finalizer == "foregroundDeletion" else ""))
    truth = next(iter(held.items()), (None, []))
    if wrong:
        return ctx.failed("released correctly, but the diagnosis is wrong: " + "; ".join(wrong),
                          expected={"pod": truth[0], "finalizer": truth[1]},
                          observed={"pod": pod_name, "finalizer": finalizer})
    return ctx.passed(f"Pod {pod_name}'s finalizer {finalizer} held up {name}'s foreground deletion; once it was "
                      "released the GC removed foregroundDeletion itself")
