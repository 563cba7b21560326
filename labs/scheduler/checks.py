"""Checks of the scheduler lab.

why-pending reads the live lab (the Pod web, the Nodes node-a..d) and judges the Pod's
tolerations with labkit's reconstruction of the TaintToleration plugin (labkit.scheduler.objects
tolerates, after toleration.go ToleratesTaint) against the taints of the lab's Nodes as lab.py
builds them. The predictions are judged against labkit's reconstruction of v1.34.1: the
taint-eviction controller (labkit.scheduler.tainteviction) on the Pods of node-e as lab.py builds
them, and the default profile's scheduling cycle with DefaultPreemption (labkit.scheduler.framework)
on the case files the lab ships. A prediction whose case `labkit scheduler explain` has already
shown is judged as it was written then (labkit.scheduler.withhold keeps that copy).

Each check is `judge_<name>(ctx, observe_<name>(ctx))`: the observation is plain data, the
judge a pure verdict on it (the mutant run judges mutated observations). Feedback names what is
wrong and where to look; the right answer goes only into `right_answer` (withheld from students).
"""

from __future__ import annotations

import copy
import random
from pathlib import Path

from labkit.apiserver.target import for_env
from labkit.exercises import LIVE, AnswerMalformed, CheckFailed, wait_for
from labkit.scheduler import framework as fw
from labkit.scheduler import tainteviction
from labkit.scheduler.objects import Pod, tolerates
from labkit.scheduler.play import load_case, pod_of, snapshot_of
from labkit.scheduler.profiles import make_profile
from labkit import predictions

BRIEF = 1.5         # seconds a check waits for the scheduler's next attempt before it says "check again"
NEVER = "never"



def _is_binding(ref: dict) -> bool:
    """An audit objectRef of a Pod's binding: POST pods/NAME/binding, or POST bindings with the
    Pod's name in the Binding (both are served; client libraries use either)."""
    return (ref.get("resource"), ref.get("subresource", "")) in (("pods", "binding"), ("bindings", ""))

def _lab(ctx):
    return ctx.lab.environment_module()


# the tolerations the DefaultTolerationSeconds admission plugin adds to a Pod that has none of its
# own for these taints (plugin/pkg/admission/defaulttolerationseconds/admission.go)
DEFAULT_TOLERATIONS = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                       for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")]


def own_tolerations(tolerations: list) -> list:
    """A Pod's tolerations without those DefaultTolerationSeconds added."""
    return [t for t in tolerations or [] if t not in DEFAULT_TOLERATIONS]


def _taint_text(taint: dict) -> str:
    return f"{taint['key']}={taint.get('value', '')}:{taint['effect']}"


EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def tolerated_taints(tolerations: list, known: list) -> set[str]:
    """The taints, as `key=value:effect`, that some of `tolerations` tolerates (labkit's
    TaintToleration reconstruction, objects.tolerates after toleration.go ToleratesTaint), over
    the whole space that tells tolerations apart: every key and value the tolerations and the
    `known` taints name, one key and one value none names, and every effect."""
    keys = {t.get("key") for t in [*tolerations, *known] if t.get("key")} | {"labkit.example/another-key"}
    values = {t.get("value") or "" for t in [*tolerations, *known]} | {"another-value"}
    return {_taint_text(taint) for taint in ({"key": k, "value": v, "effect": e} for k in keys for v in values
                                             for e in EFFECTS)
            if any(tolerates(tol, taint) for tol in tolerations)}


# -- why-pending ------------------------------------------------------------------------------------

def _node_view(node: dict | None) -> dict | None:
    """What of a Node the exercises keep as it was: its taints, labels, allocatable resources and
    spec.unschedulable."""
    if node is None:
        return None
    spec = node.get("spec") or {}
    return {"taints": [{k: t[k] for k in ("key", "value", "effect") if k in t} for t in spec.get("taints") or []],
            "labels": dict(node["metadata"].get("labels") or {}),
            "allocatable": dict((node.get("status") or {}).get("allocatable") or {}),
            "unschedulable": bool(spec.get("unschedulable"))}


def _lab_nodes(lab) -> dict:
    """Every Node the lab registers, as lab.py builds it."""
    return {n["metadata"]["name"]: n for n in (*lab.PENDING_NODES.values(), lab.DRAIN_NODE, lab.RETIRING_NODE)}


def _changed_nodes(lab, seen: dict, names) -> list[str]:
    """`node-a (taints, labels)` for each of `names` whose view differs from the lab's build (any
    Node the lab registers: those of _lab_nodes and the spread and binpack pools)."""
    built_nodes = {**_lab_nodes(lab), **lab.ZONE_NODES, **lab.PACK_NODES}
    out = []
    for name in names:
        now, built = seen.get(name), _node_view(built_nodes[name])
        if now != built:
            out.append(f"{name} ({'gone' if now is None else ', '.join(k for k in built if now.get(k) != built[k])})")
    return out


def _pod_view(pod: dict | None) -> dict | None:
    if pod is None:
        return None
    spec = pod.get("spec") or {}
    return {"nodeName": spec.get("nodeName"), "nodeSelector": spec.get("nodeSelector") or {},
            "requests": [((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or []],
            "tolerations": list(spec.get("tolerations") or [])}


def observe_why_pending(ctx):
    p = ctx.params
    client = for_env(ctx.env).client()
    lab = _lab(ctx)

    def pod():
        live = client.get_or_none("v1", "pods", p["pod"], p["namespace"])
        view = _pod_view(live)
        return None if view is None else {**view, "terminating": bool(live["metadata"].get("deletionTimestamp"))}
    seen = pod()
    # tolerations that fit: the scheduler binds on its next attempt (a cluster event, or its backoff)
    team = next(t for node in lab.PENDING_NODES.values() for t in node["spec"].get("taints") or []
                if _taint_text(t) == p["allowed_taint"])
    if seen is not None and not seen["nodeName"] and any(tolerates(t, team) for t in seen["tolerations"]):
        wait_for(lambda: (pod() or {}).get("nodeName"), timeout=BRIEF, interval=0.1)
        seen = pod()
    target = for_env(ctx.env)
    by_hand = sorted({(e.get("user") or {}).get("username", "") for e in target.audit(since=ctx.ready_time) or []
                      if e.get("verb") == "create" and _is_binding(e.get("objectRef") or {})
                      and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                      and (e.get("objectRef") or {}).get("name") == p["pod"]
                      and not (e.get("user") or {}).get("username", "").startswith("system:")
                      and (e.get("responseStatus") or {}).get("code", 500) < 300})
    node_name = (seen or {}).get("nodeName")
    live = client.get_or_none("v1", "nodes", node_name) if node_name else None
    return {"pod": seen, "nodes": {name: _node_view(client.get_or_none("v1", "nodes", name))
                                   for name in lab.PENDING_NODES},
            "bound_by_hand": by_hand,
            "bound_by": _binders_since_created(ctx, p["namespace"], p["pod"], wait=bool(node_name)),
            "deleted_by": _deleters_since_created(ctx, p["namespace"], p["pod"]) if (seen or {}).get("terminating")
            else [],
            "placement": _placement(client, live, node_name, p["namespace"], p["pod"])}


def _pod_request(e: dict, verb: str) -> bool:
    """An audit event of `verb` on a Pod itself (no subresource)."""
    ref = e.get("objectRef") or {}
    return e.get("verb") == verb and ref.get("resource") == "pods" and not ref.get("subresource")


def _users_since_created(ctx, namespace: str, pod: str, acted) -> list[str]:
    """The users of the successful requests about the Pod that `acted(audit event)` selects, since
    the Pod was last created (the audit log, since the exercise's part was built)."""
    from labkit.apiserver.audit import received_at

    def about_it(e):
        ref = e.get("objectRef") or {}
        return (ref.get("namespace") == namespace and ref.get("name") == pod
                and (e.get("responseStatus") or {}).get("code", 500) < 300)
    events = [e for e in for_env(ctx.env).audit(since=ctx.ready_time) or [] if about_it(e)]
    created = max((received_at(e) for e in events if _pod_request(e, "create")), default=0.0)
    return sorted({(e.get("user") or {}).get("username", "") for e in events if acted(e) and received_at(e) >= created})


def _binders_since_created(ctx, namespace: str, pod: str, wait: bool) -> list[str]:
    """Who bound the Pod since it was last created: the users of the successful POSTs of its
    binding after its last create. None for a Pod created with spec.nodeName, which no binding
    places. `wait`: the Pod is bound, and a binding's audit line is written once its response has
    been sent, so it may come a moment after the bound Pod was read."""
    def binders():
        return _users_since_created(ctx, namespace, pod,
                                    lambda e: e.get("verb") == "create" and _is_binding(e.get("objectRef") or {}))
    found = binders()
    if wait and not found:
        found = wait_for(binders, timeout=BRIEF, interval=0.1) or binders()
    return found


def _deleters_since_created(ctx, namespace: str, pod: str) -> list[str]:
    """Who deleted the Pod since it was last created: a Pod with a deletionTimestamp stays
    Terminating here, as no kubelet confirms that its containers stopped."""
    return _users_since_created(ctx, namespace, pod, lambda e: _pod_request(e, "delete"))


def _terminating_failure(ctx, name: str, deleted_by: list[str], reset: str):
    """A Pod the exercise wants running is being deleted: it never runs again."""
    by = f" by {', '.join(deleted_by)}" if deleted_by else ""
    return ctx.failed(f"{name} is being deleted (Terminating: deleted{by}): a Pod being deleted never runs again, "
                      "and with no kubelet to confirm that its containers stopped it stays so. The workload is to "
                      f"run: make the Pod again ({reset})", expected="a Pod that is not being deleted",
                      observed=f"Terminating{by}", observed_in=LIVE)


def _placement(client, live_node: dict | None, node_name: str, namespace: str, pod: str) -> dict | None:
    """What the Filter plugins need to judge `pod` on its node: the Node, and the other Pods bound
    there that still hold resources (not Succeeded or Failed); None without a node."""
    if live_node is None:
        return None
    return {"node": _filter_node(live_node),
            "others": [_bound_view(o) for o in client.list("v1", "pods")[0]
                       if (o.get("spec") or {}).get("nodeName") == node_name
                       and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                       and not (o["metadata"].get("namespace") == namespace and o["metadata"]["name"] == pod)]}


def _requests_changed(built: list, now: list) -> str:
    """Which requests differ, per container: `memory removed`, `cpu changed`, `a container added`."""
    if len(built) != len(now):
        return "a container added" if len(now) > len(built) else "a container removed"
    out = []
    for was, isnow in zip(built, now):
        for key in sorted(set(was) | set(isnow)):
            if was.get(key) != isnow.get(key):
                out.append(f"{key} " + ("removed" if key not in isnow else "added" if key not in was else "changed"))
    return ", ".join(out)


def judge_why_pending(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["pod"]
    lab = _lab(ctx)
    what = _changed_nodes(lab, obs["nodes"], lab.PENDING_NODES)
    if what:
        return ctx.failed(f"the Node(s) {', '.join(what)} changed: the task is to change the Pod, not the nodes "
                          f"(`labkit reset scheduler {ctx.exercise.id}` brings them back as they were)",
                          expected="node-a to node-d as the lab registered them", observed=what, observed_in=LIVE)
    pod = obs["pod"]
    if pod is None:
        raise CheckFailed(f"there is no Pod {name} in namespace {ns}: `labkit reset scheduler {ctx.exercise.id}` "
                          "creates it again")
    built = _pod_view({"spec": lab.WEB["spec"]})
    if pod["requests"] != built["requests"]:
        return ctx.failed(f"the resource requests of {name} changed ({_requests_changed(built['requests'], pod['requests'])}"
                          "): keep its requests as they were (it needs its 2 CPUs); the nodes with too little CPU "
                          "are not the ones to use", expected="the requests as built",
                          observed=pod["requests"], observed_in=LIVE)
    if pod["nodeSelector"] != built["nodeSelector"]:
        return ctx.failed(f"the nodeSelector of {name} changed: keep it (the Pod needs a disk=ssd node); the nodes "
                          "it does not match are not the ones to use", expected="the nodeSelector as built",
                          observed=pod["nodeSelector"], observed_in=LIVE)
    # the taints of every Node the lab registers (those of the other exercises' pools keep web away too)
    taints = [(n, t) for n, node in {**lab.PENDING_NODES, **lab.ZONE_NODES, **lab.PACK_NODES}.items()
              for t in node["spec"].get("taints") or []]
    allowed = p["allowed_taint"]
    on: dict[str, list[str]] = {}
    for n, t in taints:
        if _taint_text(t) != allowed and any(tolerates(tol, t) for tol in pod["tolerations"]):
            on.setdefault(_taint_text(t), []).append(n)
    too_many = [f"{text} (on {', '.join(nodes)})" for text, nodes in on.items()]
    if too_many:
        return ctx.failed(f"the tolerations of {name} tolerate more than the team's taint: also "
                          f"{', '.join(too_many)}, which keep{'s' if len(too_many) == 1 else ''} the Pod away on "
                          "purpose. Compare each toleration's "
                          "key, operator, value and effect with the taints of `kubectl describe node`",
                          expected=f"tolerations of {allowed} only", observed=pod["tolerations"], observed_in=LIVE)
    team = next(t for _n, t in taints if _taint_text(t) == allowed)
    if not any(tolerates(tol, team) for tol in pod["tolerations"]):
        return ctx.failed(f"{name} does not tolerate the taint {allowed}"
                          + (" (its tolerations match no taint of node-a to node-d: compare key, operator, value "
                             "and effect)" if pod["tolerations"] else "")
                          + f": read the FailedScheduling event of `kubectl describe pod {name} -n {ns}`, and the "
                          "nodes' taints", expected=f"a toleration of {allowed}",
                          observed=pod["tolerations"] or "no tolerations", observed_in=LIVE)
    wider = tolerated_taints(own_tolerations(pod["tolerations"]), [t for _n, t in taints]) - {allowed}
    if wider:
        return ctx.failed(f"the tolerations of {name} tolerate more than the team's taint: besides {allowed} they "
                          "also tolerate taints with another value, key or effect (none of which is on a node "
                          "today). Tolerate the team's taint only: compare each toleration's key, operator, value "
                          "and effect with it", expected=f"tolerations of {allowed} only",
                          observed=own_tolerations(pod["tolerations"]), observed_in=LIVE)
    if pod.get("terminating"):
        return _terminating_failure(ctx, name, obs.get("deleted_by") or [],
                                    f"`labkit reset scheduler {ctx.exercise.id}` to start over")
    if not pod["nodeName"]:
        return ctx.error(f"{name} tolerates {allowed} but is not bound yet: the scheduler retries it after its "
                         "backoff (at most 10 s); check again in a few seconds")
    if obs.get("bound_by_hand"):
        return ctx.failed(f"{name} was bound to {pod['nodeName']} by hand (a POST of pods/{name}/binding by "
                          f"{', '.join(obs['bound_by_hand'])}): the task is to make the Pod schedulable, so that the "
                          f"scheduler places it (`labkit reset scheduler {ctx.exercise.id}` to start over)",
                          expected="bound by the scheduler", observed=f"bound by {', '.join(obs['bound_by_hand'])}",
                          observed_in=LIVE)
    if SCHEDULER_USER not in obs["bound_by"]:
        return ctx.failed(f"{name} was given {pod['nodeName']} by hand (spec.nodeName set when it was created): no "
                          "scheduler judged that node. The task is to make the Pod schedulable, so that the "
                          f"scheduler places it: create it without a node (`labkit reset scheduler {ctx.exercise.id}` "
                          "to start over)", expected="bound by the scheduler",
                          observed=f"on {pod['nodeName']}, spec.nodeName set when it was created", observed_in=LIVE)
    problem = _filter_problem(pod | {"name": name, "namespace": ns}, obs.get("placement"))
    if problem:
        return ctx.failed(f"{name} is on {pod['nodeName']}, where kube-scheduler's Filter plugins would not put it "
                          f"({problem}): the scheduler places a Pod that names no node; `labkit reset scheduler "
                          f"{ctx.exercise.id}` to start over", expected="a node that passes Filter for the Pod",
                          observed=f"{pod['nodeName']}: {problem}", observed_in=LIVE)
    return ctx.passed(f"{name} is bound to {pod['nodeName']}: it tolerates {allowed} and nothing else, and keeps "
                      "its requests and nodeSelector")


def check_why_pending(ctx):
    return judge_why_pending(ctx, observe_why_pending(ctx))


# -- taint-effects -----------------------------------------------------------------------------------

def _node_rest(node: dict | None) -> dict | None:
    """What else of a Node the lab registers, beyond _node_view: its annotations, the rest of its
    spec, its capacity and conditions (type and status), as a kubelet reports them."""
    if node is None:
        return None
    status = node.get("status") or {}
    return {"annotations": dict(node["metadata"].get("annotations") or {}),
            "spec": {k: v for k, v in (node.get("spec") or {}).items() if k not in ("taints", "unschedulable")},
            "capacity": dict(status.get("capacity") or {}),
            "conditions": sorted(f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or [])}


def observe_taint_effects(ctx):
    p = ctx.params
    target = for_env(ctx.env)
    client = target.client()
    retiring = client.get_or_none("v1", "nodes", p["node"])
    # a Pod legacy deleted by the student and made again is not the Pod that ran there
    replaced = any(e.get("verb") == "delete" and (e.get("objectRef") or {}).get("resource") == "pods"
                   and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                   and (e.get("objectRef") or {}).get("name") == p["pod"]
                   and not (e.get("user") or {}).get("username", "").startswith("system:")
                   and (e.get("responseStatus") or {}).get("code", 500) < 300
                   for e in target.audit(since=ctx.ready_time) or [])
    # node-f deleted by the student and registered again is not node-f tainted: a Node deleted takes
    # its Pods with it on a cluster (the Pod GC controller, podgc/gc_controller.go gcOrphaned, deletes
    # the Pods bound to a Node that stays gone past its 40 s quarantine)
    node_deleted = any(e.get("verb") == "delete" and (e.get("objectRef") or {}).get("resource") == "nodes"
                       and (e.get("objectRef") or {}).get("name") == p["node"]
                       and not (e.get("user") or {}).get("username", "").startswith("system:")
                       and (e.get("responseStatus") or {}).get("code", 500) < 300
                       for e in target.audit(since=ctx.ready_time) or [])
    # legacy deleted by a component since the part was built: the taint-eviction controller, under a
    # NoExecute taint that was on node-f for a moment (the deletion stands once it is sent, and with no
    # kubelet to confirm it the Pod stays Terminating)
    evicted_by = sorted({(e.get("user") or {}).get("username", "") for e in target.audit(since=ctx.ready_time) or []
                         if e.get("verb") == "delete" and (e.get("objectRef") or {}).get("resource") == "pods"
                         and not (e.get("objectRef") or {}).get("subresource")
                         and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                         and (e.get("objectRef") or {}).get("name") == p["pod"]
                         and (e.get("user") or {}).get("username", "").startswith("system:")
                         and (e.get("responseStatus") or {}).get("code", 500) < 300})
    pod = client.get_or_none("v1", "pods", p["pod"], p["namespace"])
    return {"nodes": {name: _node_view(client.get_or_none("v1", "nodes", name)) for name in _lab_nodes(_lab(ctx))},
            "rest": _node_rest(retiring),
            "pod": pod is not None,
            "pod_terminating": bool(((pod or {}).get("metadata") or {}).get("deletionTimestamp")),
            "evicted_by": evicted_by,
            "pod_tolerations": ((pod or {}).get("spec") or {}).get("tolerations") or [],
            "pod_deleted": replaced, "node_deleted": node_deleted}


def judge_taint_effects(ctx, obs):
    p = ctx.params
    lab = _lab(ctx)
    name = p["node"]
    others = _changed_nodes(lab, obs["nodes"], [n for n in _lab_nodes(lab) if n != name])
    if others:
        return ctx.failed(f"the Node(s) {', '.join(others)} changed: only {name} is being retired; put them back "
                          "as they were",
                          expected=f"every Node but {name} as the lab registered it", observed=others, observed_in=LIVE)
    node = obs["nodes"].get(name)
    if node is None:
        raise CheckFailed(f"the Node {name} is gone: `labkit reset scheduler {ctx.exercise.id}` registers it again")
    built = _node_view(lab.RETIRING_NODE)
    fields = [k for k in ("labels", "allocatable") if node.get(k) != built[k]]
    if fields:
        return ctx.failed(f"the {' and '.join(fields)} of {name} changed: add a taint and change nothing else",
                          expected=f"the {' and '.join(fields)} as registered", observed={k: node.get(k) for k in fields},
                          observed_in=LIVE)
    rest, built_rest = obs.get("rest"), _node_rest(lab.RETIRING_NODE)
    if rest is not None:
        fields = [k for k in built_rest if rest.get(k) != built_rest[k]]
        if fields:
            return ctx.failed(f"the {' and '.join(fields)} of {name} changed: add a taint and change nothing else "
                              f"(`labkit reset scheduler {ctx.exercise.id}` registers {name} again)",
                              expected=f"the {' and '.join(fields)} as registered",
                              observed={k: rest.get(k) for k in fields}, observed_in=LIVE)
    if node.get("unschedulable"):
        return ctx.failed(f"{name} is cordoned (spec.unschedulable): the NodeUnschedulable plugin's Filter then "
                          "rejects it for every Pod that does not tolerate node.kubernetes.io/unschedulable, even when "
                          "no other node fits (`kubectl uncordon`, then think about taint effects)",
                          expected="spec.unschedulable false", observed=True, observed_in=LIVE)
    taints = node.get("taints") or []
    if not taints:
        raise CheckFailed(f"{name} has no taint yet: `kubectl describe node {name}` shows its taints")
    if obs.get("node_deleted"):
        return ctx.failed(f"you deleted the Node {name} and registered it again: that retires it by force, not with a "
                          f"taint; on a cluster the Pod GC controller deletes the Pods bound to a Node that stays gone "
                          f"(podgc/gc_controller.go gcOrphaned), {p['pod']} among them. Taint {name} in place "
                          f"(`labkit reset scheduler {ctx.exercise.id}` registers it as the lab built it)",
                          expected=f"{name} never deleted", observed="deleted", observed_in=LIVE)
    legacy = Pod(lab.LEGACY)
    evicts = [t for t in taints if t.get("effect") == "NoExecute"
              and tainteviction.eviction_delay(legacy, [t]) is not None]
    if evicts:
        live = Pod(dict(lab.LEGACY, spec={**lab.LEGACY["spec"], "tolerations": obs.get("pod_tolerations") or []}))
        if any(tainteviction.eviction_delay(live, [t]) is not None for t in evicts):
            why = f"it makes the taint-eviction controller delete {p['pod']}, which does not tolerate it"
        else:       # the student gave legacy a toleration: it stays, new Pods are still kept off
            why = (f"{p['pod']} stays only through the toleration you gave it, and the TaintToleration Filter rejects "
                   f"{name} for every new Pod that does not tolerate the taint, even when no other node fits")
        return ctx.failed(f"the taint {_taint_text(evicts[0])} has effect NoExecute: {why}",
                          expected=f"a taint that only lowers {name}'s score, {p['pod']} left running",
                          observed=[_taint_text(t) for t in taints], observed_in=LIVE)
    forbids = [t for t in taints if t.get("effect") == "NoSchedule"]
    if forbids:
        return ctx.failed(f"the taint {_taint_text(forbids[0])} has effect NoSchedule: the TaintToleration Filter "
                          f"rejects {name} for every Pod that does not tolerate it, even when no other node fits",
                          expected=f"a taint that only lowers {name}'s score", observed=[_taint_text(t) for t in taints],
                          observed_in=LIVE)
    # validation.go validateTaintEffect: kube-apiserver v1.34 accepts these three effects only
    unknown = [t for t in taints if t.get("effect") not in EFFECTS]
    if unknown:
        return ctx.failed(f"the taint {_taint_text(unknown[0])} has the effect {unknown[0].get('effect')!r}, which is "
                          f"none of {', '.join(EFFECTS)}: kube-apiserver v1.34 refuses such a taint "
                          "(validation.go validateTaintEffect: Unsupported value), and no scheduler plugin acts on it; "
                          "check its spelling",
                          expected=f"a taint of one of the effects {', '.join(EFFECTS)}",
                          observed=[_taint_text(t) for t in taints], observed_in=LIVE)
    if not obs["pod"]:
        return ctx.failed(f"the Pod {p['pod']} is gone: it was to keep running on {name} (`labkit reset scheduler "
                          f"{ctx.exercise.id}` brings it back)", expected=f"{p['pod']} still there", observed="gone",
                          observed_in=LIVE)
    if obs.get("pod_deleted"):
        return ctx.failed(f"you deleted the Pod {p['pod']}: one made again under its name is not the Pod that ran on "
                          f"{name}, which was to keep running (`labkit reset scheduler {ctx.exercise.id}` brings it "
                          "back)", expected=f"{p['pod']} never deleted", observed="deleted", observed_in=LIVE)
    if obs.get("pod_terminating") or obs.get("evicted_by"):
        by = (f" by {', '.join(obs['evicted_by'])} (the taint-eviction controller, under a NoExecute taint that was "
              f"on {name})" if obs.get("evicted_by") else "")
        return ctx.failed(f"the Pod {p['pod']} was deleted{by}: a deletion stands once it is made, and the Pod no "
                          f"longer runs (it is Terminating); it was to keep running on {name} (`labkit reset scheduler "
                          f"{ctx.exercise.id}` brings it back)", expected=f"{p['pod']} never deleted",
                          observed="deleted" + by, observed_in=LIVE)
    return ctx.passed(f"{name}'s PreferNoSchedule taint passes Filter and lowers its TaintToleration score for Pods "
                      f"that do not tolerate it (0 against 100, weight 3); {p['pod']} stays")


def check_taint_effects(ctx):
    return judge_taint_effects(ctx, observe_taint_effects(ctx))


# -- own-scheduler ----------------------------------------------------------------------------------

def _bound_view(pod: dict) -> dict:
    """What of a bound Pod the Filter plugins read (labkit.scheduler.objects.Pod takes it)."""
    spec = pod.get("spec") or {}
    return {"name": pod["metadata"]["name"], "namespace": pod["metadata"].get("namespace"),
            "nodeName": spec.get("nodeName"), "schedulerName": spec.get("schedulerName"),
            "nodeSelector": spec.get("nodeSelector") or {}, "tolerations": spec.get("tolerations") or [],
            "requests": [((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or []]}


def _as_pod(view: dict) -> Pod:
    obj = {"metadata": {"name": view["name"], "namespace": view["namespace"], "uid": f"{view['namespace']}/{view['name']}"},
           "spec": {"nodeName": view["nodeName"], "nodeSelector": view["nodeSelector"], "tolerations": view["tolerations"],
                    "containers": [{"name": f"c{i}", "resources": {"requests": r}} for i, r in enumerate(view["requests"])]}}
    return Pod(obj)


def _filter_node(node: dict) -> dict:
    """What of a Node the Filter plugins read (labkit.scheduler.objects.Node takes it)."""
    return {"metadata": {"name": node["metadata"]["name"], "labels": node["metadata"].get("labels") or {}},
            "spec": {k: v for k, v in (node.get("spec") or {}).items() if k in ("taints", "unschedulable")},
            "status": {"allocatable": (node.get("status") or {}).get("allocatable") or {}}}


def _filter_problem(view: dict, placement: dict | None) -> str | None:
    """Why the default profile's Filter plugins (labkit's reconstruction, framework.run_filters)
    reject the Pod `view` (a _bound_view) on the node it is bound to, next to the `others` bound
    there; None when it passes."""
    from labkit.scheduler.objects import Node, NodeInfo
    if placement is None:
        return f"{view['nodeName']} is no Node"
    node = NodeInfo(Node(placement["node"]), [_as_pod(o) for o in placement["others"]])
    pod = _as_pod(view)
    cycle = fw.Cycle(pod, make_profile("default"), [node], [])
    fw.run_pre_filters(cycle, pod)
    status = fw.run_filters(cycle, pod, node)
    return None if status.ok else f"{status.plugin}: {'; '.join(status.reasons)}"


def observe_own_scheduler(ctx):
    from labkit.scheduler import own
    lab = _lab(ctx)
    target = for_env(ctx.env)
    client = target.client()

    def jobs():
        return {name: (lambda p: None if p is None else _bound_view(p))(client.get_or_none("v1", "pods", name,
                                                                                       ctx.params["namespace"]))
                for name in lab.JOBS}
    seen = jobs()
    running = own.running(ctx.env)
    if running and any(j is not None and not j["nodeName"] for j in seen.values()):
        wait_for(lambda: all(j is None or j["nodeName"] for j in jobs().values()), timeout=BRIEF, interval=0.1)
        seen = jobs()
    # each successful binding of a Pod of sched that is not the cluster's own, by who sent it: the
    # program `labkit scheduler serve` runs authenticates as own.USER, the student's kubectl does not
    bound_by: dict[str, set] = {}
    for e in target.audit(since=ctx.ready_time) or []:
        ref, user = e.get("objectRef") or {}, (e.get("user") or {}).get("username", "")
        if e.get("verb") == "create" and _is_binding(ref) \
                and ref.get("namespace") == ctx.params["namespace"] and ref.get("name") \
                and not user.startswith("system:") and (e.get("responseStatus") or {}).get("code", 500) < 300:
            bound_by.setdefault(user, set()).add(ref["name"])
    bindings = sorted(bound_by.get(own.USER, set()))
    # kube-scheduler does not see Pods that ended (pkg/scheduler/scheduler.go newPodInformer: a field
    # selector leaves out phases Succeeded and Failed): a job the kubelet rejected takes no room
    terminal = sorted(name for name in lab.JOBS if ((client.get_or_none("v1", "pods", name, ctx.params["namespace"])
                                                     or {}).get("status") or {}).get("phase") in ("Succeeded", "Failed"))
    by_hand = sorted({n for user, names in bound_by.items() if user != own.USER for n in names})
    nodes = sorted(client.list("v1", "nodes")[0], key=lambda n: n["metadata"]["name"])
    others = [_bound_view(p) for p in client.list("v1", "pods")[0] if (p.get("spec") or {}).get("nodeName")
              and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and
              not (p["metadata"].get("namespace") == ctx.params["namespace"] and p["metadata"]["name"] in lab.JOBS)]
    probe = None
    if running and all(v is not None and v["nodeName"] for v in seen.values()):
        probe = _probe(ctx, lab, target)
    return {"jobs": seen, "bindings": bindings, "by_hand": by_hand, "running": running, "terminal": terminal,
            "nodes": [{"metadata": {"name": n["metadata"]["name"], "labels": n["metadata"].get("labels") or {}},
                       "spec": {k: v for k, v in (n.get("spec") or {}).items() if k in ("taints", "unschedulable")},
                       "status": {"allocatable": (n.get("status") or {}).get("allocatable") or {}}} for n in nodes],
            "others": others, "probe": probe}


PROBE_WAIT = 5.0        # seconds the check gives the student's scheduler to bind its Pod
PROBE_TAINT = {"key": "dedicated", "value": "probe", "effect": "NoSchedule"}     # on one of the test Nodes
# on every test Node, and tolerated by the test Pod alone: the lab's scheduler must not bind a Pending
# Pod of the lab (web, whose nodeSelector the disk=ssd test Nodes match) there, for the Pod
# garbage collector deletes a Pod whose node is gone once the check deletes the test Nodes
PROBE_KEEP_OUT = {"key": "labkit.example/probe", "value": "own-scheduler", "effect": "NoSchedule"}
# the test Pod's tolerations of PROBE_TAINT's key that do not tolerate it (toleration.go
# ToleratesTaint: the effect, when set, and the value of operator Equal must be the taint's): a
# scheduler that matches tolerations by key alone, or by key and value without the effect, takes
# the tainted test Nodes for tolerated
PROBE_NEAR_MISSES = [{"key": PROBE_TAINT["key"], "operator": "Equal", "value": "other", "effect": "NoSchedule"},
                     {"key": PROBE_TAINT["key"], "operator": "Equal", "value": PROBE_TAINT["value"],
                      "effect": "NoExecute"}]


def _probe(ctx, lab, target) -> dict:
    """A situation the student's scheduler cannot have been written for: nine Nodes it has never
    seen, under names drawn at random, and a Pod for them that asks for 12 CPUs and 512Mi (like
    job-1): no other node has that much CPU free. Only one of them fits it, `fit` (disk=hdd, 16
    CPUs); of the others, two are cordoned (NodeUnschedulable), two have a NoSchedule taint the
    Pod does not tolerate (TaintToleration: a scheduler that honours the rest but not taints, and
    prefers the most room, goes to the one of 64 CPUs), two are disk=ssd (NodeAffinity, the
    nodeSelector) and two have 256Mi of memory (NodeResourcesFit). Of each pair one has fewer
    CPUs than `fit` and one more, and one sorts before `fit` by name and the other after it: a
    scheduler that ignores the nodeSelector, memory, spec.unschedulable or taints, and picks the
    roomiest, the tightest, the first or the last node by name picks one of them (with one tainted
    Node only, on a side drawn at random, a first-fit scheduler ignoring taints passed every other
    time). The cordoned Nodes get the taint node.kubernetes.io/unschedulable from the node
    lifecycle controller (TaintNodesByCondition) as they join, as upstream's do: a scheduler that
    honours taints keeps away from them once it is there. Every one of them carries the taint
    PROBE_KEEP_OUT, which the test Pod alone tolerates: the lab's own scheduler places none of the
    lab's Pending Pods there. The test Pod also carries PROBE_NEAR_MISSES, tolerations of the
    tainted Nodes' taint key that do not tolerate their taint (another value; another effect): a
    scheduler that matches tolerations by key alone, or without their effect, takes those Nodes
    for tolerated and picks one, whichever it prefers (the roomiest, the tightest, the first or the
    last by name). The check waits until
    the Pod is bound (at most PROBE_WAIT s), notes where and by whom, and deletes the three
    objects again. The judge says, with labkit's reconstruction of the Filter plugins, whether the
    Pod's node fits it."""
    import secrets
    import time as _time
    from labkit.scheduler import own
    client = target.client()
    ns = ctx.params["namespace"]
    token = secrets.token_hex(3)
    rng = secrets.SystemRandom()
    # role -> (disk, CPUs, memory, cordoned, taints); `fit` is the only one that fits the Pod
    roles = {"fit": ("hdd", "16", "32Gi", False, []),
             "cordoned": ("hdd", "32", "32Gi", True, []), "cordoned-small": ("hdd", "15", "32Gi", True, []),
             "tainted": ("hdd", "64", "32Gi", False, [PROBE_TAINT]),
             "tainted-small": ("hdd", "12", "32Gi", False, [PROBE_TAINT]),
             "ssd-small": ("ssd", "13", "32Gi", False, []), "ssd-big": ("ssd", "128", "32Gi", False, []),
             "short-small": ("hdd", "14", "256Mi", False, []), "short-big": ("hdd", "96", "256Mi", False, [])}
    before, after = [], []
    for pair in (("ssd-small", "ssd-big"), ("short-small", "short-big"), ("cordoned-small", "cordoned"),
                 ("tainted-small", "tainted")):     # one on each side of fit
        first, second = rng.sample(pair, 2)
        before.append(first)
        after.append(second)
    rng.shuffle(before)
    rng.shuffle(after)
    names = {role: f"probe-{token}-{i}" for i, role in enumerate([*before, "fit", *after], start=1)}
    fit, cordoned, tainted, pod_name = names["fit"], names["cordoned"], names["tainted"], f"probe-{token}"
    built = []
    for role, (disk, cpu, memory, unschedulable, taints) in roles.items():
        node = lab._node(names[role], disk, cpu, memory, [PROBE_KEEP_OUT, *taints])
        node["metadata"]["labels"][lab.PROBE_LABEL[0]] = lab.PROBE_LABEL[1]
        if unschedulable:
            node["spec"]["unschedulable"] = True
        built.append(node)
    pod = lab.job_pod("job-1")
    pod["metadata"] = {"name": pod_name, "labels": {"app": "job", lab.PROBE_LABEL[0]: lab.PROBE_LABEL[1]}}
    pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12"
    pod["spec"]["tolerations"] = [{**PROBE_KEEP_OUT, "operator": "Equal"}, *PROBE_NEAR_MISSES]
    since = _time.time()
    try:
        lab._put_nodes(client, built)
        client.create("v1", "pods", pod, ns)
        wait_for(lambda: ((client.get_or_none("v1", "pods", pod_name, ns) or {}).get("spec") or {}).get("nodeName"),
                 timeout=PROBE_WAIT, interval=0.05)
        live = client.get_or_none("v1", "pods", pod_name, ns)
        view = None if live is None else _bound_view(live)
        node_name = (view or {}).get("nodeName")
        node = client.get_or_none("v1", "nodes", node_name) if node_name else None

        def binders() -> list[str]:
            return sorted({(e.get("user") or {}).get("username", "") for e in target.audit(since=since) or []
                           if e.get("verb") == "create" and _is_binding(e.get("objectRef") or {})
                           and (e.get("objectRef") or {}).get("namespace") == ns
                           and (e.get("objectRef") or {}).get("name") == pod_name
                           and (e.get("responseStatus") or {}).get("code", 500) < 300})
        # the audit event of a request is written as its response completes: a watcher may see
        # the Pod bound a moment before the binding's event is in the log
        by = binders() if not node_name else (wait_for(binders, timeout=1.0, interval=0.05) or binders())
        return {"pod": view, "fit": fit, "cordoned": cordoned, "tainted": tainted, "names": sorted(names.values()),
                "bound_by": by, "user": own.USER,
                "placement": None if node is None else {
                    "node": _filter_node(node),
                    "others": [_bound_view(o) for o in client.list("v1", "pods")[0]
                               if (o.get("spec") or {}).get("nodeName") == node_name
                               and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                               and o["metadata"]["name"] != pod_name]}}
    finally:
        lab.remove_probes(client)


def judge_own_scheduler(ctx, obs):
    from labkit.scheduler import own
    from labkit.scheduler.objects import Node, NodeInfo
    p = ctx.params
    lab = _lab(ctx)
    ns, name = p["namespace"], p["scheduler"]
    jobs = obs["jobs"]
    missing = [j for j, v in jobs.items() if v is None]
    if missing:
        raise CheckFailed(f"the Pod(s) {', '.join(missing)} are gone: `labkit reset scheduler {ctx.exercise.id}` "
                          "creates them again")
    built = {j: _bound_view({"metadata": {"name": j, "namespace": ns}, "spec": lab.job_pod(j)["spec"]}) for j in jobs}
    keys = ("schedulerName", "nodeSelector", "tolerations", "requests")

    def differs(view, key):
        if key == "tolerations":
            return own_tolerations(view[key]) != own_tolerations(built[view["name"]][key])
        return view[key] != built[view["name"]][key]
    changed = [f"{j} ({', '.join(k for k in keys if differs(v, k))})" for j, v in jobs.items()
               if any(differs(v, k) for k in keys)]
    if changed:
        return ctx.failed(f"the Pod(s) {', '.join(changed)} are not as the lab made them: your scheduler is to place "
                          f"the Pods as they are (`labkit reset scheduler {ctx.exercise.id}` makes them again)",
                          expected="schedulerName, tolerations, requests and nodeSelector as built", observed=changed,
                          observed_in=LIVE)
    unbound = [j for j, v in jobs.items() if not v["nodeName"]]
    if unbound and not obs["running"]:
        return ctx.failed(f"{', '.join(unbound)} not bound, and your scheduler is not running: start it with "
                          "`labkit scheduler serve` and your file (its log says why it stopped, if it did)",
                          expected="every Pod bound", observed=f"{', '.join(unbound)} Pending", observed_in=LIVE)
    if unbound:
        return ctx.failed(f"{', '.join(unbound)} not bound yet, though your scheduler runs: look at its log "
                          "(`labkit scheduler serve` printed where) and check again", expected="every Pod bound",
                          observed=f"{', '.join(unbound)} Pending", observed_in=LIVE)
    unbinding = [j for j in jobs if j not in obs["bindings"]]
    typed = [j for j in unbinding if j in obs.get("by_hand", ())]
    if typed:
        return ctx.failed(f"{', '.join(typed)} got a node through a binding sent by hand, not by your program: "
                          "the exercise is a scheduler that does it, run with `labkit scheduler serve` (its "
                          f"requests come as the user {own.USER}; `labkit reset scheduler {ctx.exercise.id}` makes "
                          "the Pods Pending again)", expected=f"a binding per Pod from {own.USER}",
                          observed=f"bound by hand: {', '.join(typed)}", observed_in=LIVE)
    if unbinding:
        return ctx.failed(f"{', '.join(unbinding)} got a node without a binding of yours: a scheduler binds a Pod "
                          "with POST pods/NAME/binding (setting spec.nodeName when creating the Pod bypasses the "
                          "scheduler)", expected="a binding per Pod, from your program", observed=obs["bindings"],
                          observed_in=LIVE)
    infos = {n["metadata"]["name"]: NodeInfo(Node(n)) for n in obs["nodes"]}
    # each job is judged next to the Pods kube-scheduler sees on its node: not the jobs that ended
    # (rejected by the kubelet, say), which take no room (observe_own_scheduler)
    placed = [*obs["others"], *(v for j, v in jobs.items() if j not in obs.get("terminal", ()))]
    profile = make_profile("default")
    problems = []
    for job, view in jobs.items():
        info = infos.get(view["nodeName"])
        if info is None:
            problems.append(f"{job} is bound to {view['nodeName']}, which is no Node")
            continue
        node = NodeInfo(info.node, [_as_pod(v) for v in placed if v["nodeName"] == info.name and v is not view])
        pod = _as_pod(view)
        cycle = fw.Cycle(pod, profile, [node], [])
        fw.run_pre_filters(cycle, pod)
        status = fw.run_filters(cycle, pod, node)
        if not status.ok:
            problems.append(f"{job} on {info.name}: {status.plugin}: {'; '.join(status.reasons)}")
    if problems:
        return ctx.failed("your scheduler put Pods where kube-scheduler's Filter plugins would not: "
                          + "; ".join(problems) + ". Compare what your scheduler checks with those plugins "
                          "(and count the Pods it bound already)", expected="each Pod on a node that fits it",
                          observed=problems, observed_in=LIVE)
    probe = obs.get("probe")
    if probe is None:
        return ctx.failed("your scheduler is not running: the check gives it a Pod of its own to place, on Nodes it "
                          "has not seen before; start it again with `labkit scheduler serve` and your file",
                          expected="your scheduler running", observed="not running", observed_in=LIVE)
    joined = probe.get("names") or [n for n in (probe["fit"], probe["cordoned"], probe.get("tainted")) if n]
    what = (f"the check's test Pod {(probe.get('pod') or {}).get('name', 'probe')} (like the jobs, but asking for 12 "
            f"CPUs), made after Nodes your scheduler had never seen joined ({', '.join(joined)}: disk=hdd and "
            "disk=ssd, some cordoned, some tainted, some short of memory)")
    if probe.get("pod") is None or not probe["pod"].get("nodeName"):
        return ctx.failed(f"your scheduler did not bind {what} within {PROBE_WAIT:g} s: a scheduler decides for each "
                          "new Pod on the Nodes as they are at that moment, including Nodes that joined after it "
                          "started; look at its log (`labkit scheduler serve` printed where)",
                          expected="the test Pod bound by your scheduler", observed="the test Pod Pending",
                          observed_in=LIVE)
    if probe["user"] not in probe.get("bound_by", ()):
        return ctx.failed(f"{what} got a node without a binding from your program", expected="a binding from "
                          f"{probe['user']}", observed=probe.get("bound_by") or "no binding", observed_in=LIVE)
    problem = _filter_problem(probe["pod"], probe.get("placement"))
    if problem:
        return ctx.failed(f"your scheduler put {what} on {probe['pod']['nodeName']}, where kube-scheduler's Filter "
                          f"plugins would not ({problem}): decide from the live Nodes and Pods, with the checks the "
                          "default profile makes, not from node names or sizes you know in advance",
                          expected="the test Pod on a node that fits it",
                          observed=f"{probe['pod']['nodeName']}: {problem}", observed_in=LIVE)
    where = ", ".join(f"{j} → {v['nodeName']}" for j, v in jobs.items())
    return ctx.passed(f"{name} bound every Pod through pods/binding to a node that fits it: {where}; and the check's "
                      "test Pod, on Nodes it had never seen, to the one that fits")


def check_own_scheduler(ctx):
    return judge_own_scheduler(ctx, observe_own_scheduler(ctx))


# -- the predictions: the answer as it was when labkit showed the outcome ---------------------------

def _prediction(ctx):
    """The answer to judge, and a note: the answer file, or the prediction as it was when
    `labkit scheduler explain` first showed the case's outcome."""
    return predictions.graded_answer(ctx)


def _case(ctx) -> dict:
    return load_case(ctx.lab.directory / ctx.params["case"])


def _cycle(case: dict) -> fw.Cycle:
    """The default profile's decision for the case's incoming Pod (ties broken with seed 0, as
    `labkit scheduler explain` does)."""
    nodes, _pods = snapshot_of(case)
    return fw.schedule(make_profile(case.get("config")), nodes, pod_of(case["incoming"]), pdbs=case.get("pdbs"),
                       rng=random.Random(0))


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():     # 50.0 is a whole number too
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        return None


# -- noexecute ---------------------------------------------------------------------------------------

def eviction_truth(lab) -> dict:
    """Seconds until each Pod of node-e is deleted once the drain taint is added (or never), by
    labkit's reconstruction of taint_eviction.go processPodOnNode."""
    out = {}
    for name in lab.DRAIN_PODS:
        delay = tainteviction.eviction_delay(Pod(lab.drain_pod(name)), [lab.DRAIN_TAINT])
        out[name] = NEVER if delay is None else int(delay)
    return out


def observe_noexecute(ctx):
    """The prediction graded (the answer file, or the copy labkit kept when `labkit scheduler play`
    or `explain` first showed part of the outcome), the six Pods the student changed, and the
    first try of the experiment in the lab's cluster that came before the prediction (_live_try:
    lab.noexecute_trial, or one kept across a reset)."""
    p = ctx.params
    lab = _lab(ctx)
    client = for_env(ctx.env).client()
    changed = []
    for name in lab.DRAIN_PODS:
        live = client.get_or_none("v1", "pods", name, p["namespace"])
        built = lab.drain_pod(name)["spec"].get("tolerations") or []
        if live is None or own_tolerations((live.get("spec") or {}).get("tolerations")) != built:
            changed.append(name)
    answer, note = _prediction(ctx)
    return {"answer": answer, "note": note, "changed": changed, "tried": _live_try(ctx)}


def _written_at(path) -> float | None:
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return None


def judge_noexecute(ctx, obs):
    lab = _lab(ctx)
    answer, kept_note = obs["answer"], obs.get("note", "")
    if not isinstance(answer, dict):
        raise CheckFailed("write a mapping of each Pod name to 0, a number of seconds, or never" + kept_note,
                          expected="a mapping", observed=answer)
    truth = eviction_truth(lab)
    given = {}
    for name in truth:
        value = ctx.answer_field(answer, name, (int, str))
        text = str(value).strip().lower()
        if text == NEVER:
            given[name] = NEVER
        elif _int(value) is not None and _int(value) >= 0:
            given[name] = _int(value)
        else:
            raise CheckFailed(f"{name}: write 0 (at once), a number of seconds, or never",
                              expected="0, seconds, or never", observed=value)
    extra = sorted(set(map(str, answer)) - set(truth))
    if extra:
        raise CheckFailed(f"{', '.join(extra)}: not a Pod on {ctx.params['node']}: predict for the six Pods labelled "
                          "app=drain", expected=sorted(truth), observed=sorted(map(str, answer)))
    if obs.get("tried"):
        tried = obs["tried"]
        return ctx.failed(f"you tried the experiment in the lab's cluster before your prediction: {tried['what']} at "
                          f"{tried['time']} (kubectl shows what followed), and your prediction was written "
                          "or changed after that: a prediction made after watching is not one, and earns no points. "
                          "Work it out from the Pods' tolerations (see the hints); a reset does not change that "
                          "(labkit keeps when it was)",
                          expected="a prediction written before the experiment was tried",
                          observed=f"answer written after {tried['what']}", observed_in=LIVE)
    note = (f" (you changed or removed {', '.join(obs['changed'])}: the check judges the Pods as the lab built them)"
            if obs.get("changed") else "") + kept_note
    wrong = [name for name in truth if given[name] != truth[name]]
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, len(truth), "Pods", advice="for each Pod, find the toleration "
                                            "that matches the taint, if any, and its tolerationSeconds (see the hints)")
                          + note, expected="when the taint-eviction controller deletes each Pod",
                          right_answer=truth)
    return ctx.passed("your prediction is what v1.34.1's taint-eviction controller does to each Pod (labkit's "
                      "reconstruction)" + note)


def check_noexecute(ctx):
    return judge_noexecute(ctx, observe_noexecute(ctx))


# -- score-predict -----------------------------------------------------------------------------------

def score_truth(case: dict) -> dict:
    cycle = _cycle(case)
    return {"node": cycle.chosen, "fit": {n: v[1] for n, v in cycle.scores.get("NodeResourcesFit", {}).items()}}


def _live_try(ctx) -> dict | None:
    """The first try of the exercise's experiment in the lab's cluster (lab.live_trial: a decision
    of the lab's scheduler on a copy of the case, or for noexecute a NoExecute taint on node-e or
    a copy of its Pods; one kept before a reset: labkit.predictions.kept_trial), when the
    prediction graded was written or changed after it; else None. A prediction labkit kept when a
    tool showed the outcome is judged as it was: it counts when it was kept before the try, or
    kept later from an answer file last written before the try."""
    tried = _lab(ctx).live_trial(ctx.env, ctx.exercise.id, ctx.ready_time)
    earlier = predictions.kept_trial(ctx.lab.id, ctx.exercise.id)
    if earlier is not None and (tried is None or earlier["at"] <= tried["at"]):
        tried = earlier
    if tried is None:
        return None
    kept = predictions.kept(ctx.lab.id, ctx.exercise.id)
    if kept is not None:      # kept before the try, or kept later from a file written before it
        return None if kept.at <= tried["at"] or (kept.written is not None and kept.written < tried["at"]) else tried
    written = _written_at(ctx.answer_path)
    return None if written is not None and written < tried["at"] else tried


def _tried_feedback(ctx, tried: dict):
    return ctx.failed(f"{tried['what']} at {tried['time']}, and its situation is this exercise's case (a copy of "
                      f"{ctx.params['case']} built in the lab's cluster: kubectl showed where it went); your "
                      "prediction was written or changed after that: a prediction made after watching is not one, "
                      "and earns no points. Work it out from the case file (see the hints); a reset does not change "
                      "that (labkit keeps when it was)",
                      expected="a prediction written before the case was tried in the lab's cluster",
                      observed=f"answer written after {tried['what']}", observed_in=LIVE)


def observe_score_predict(ctx):
    answer, note = _prediction(ctx)
    return {"answer": answer, "note": note, "tried": _live_try(ctx)}


def judge_score_predict(ctx, obs):
    answer, note = obs["answer"], obs["note"]
    truth = score_truth(_case(ctx))
    node = str(ctx.answer_field(answer, "node", str)).strip()
    fit = ctx.answer_field(answer, "fit", dict)
    if obs.get("tried"):
        return _tried_feedback(ctx, obs["tried"])
    if node not in truth["fit"]:
        raise CheckFailed(f"node: {node!r} is not a node of the case", expected=sorted(truth["fit"]), observed=node)
    for name in fit:
        if str(name) not in truth["fit"]:
            raise CheckFailed(f"fit: {name!r} is not a node of the case", expected=sorted(truth["fit"]),
                              observed=sorted(map(str, fit)))
    missing = [n for n in truth["fit"] if n not in fit]
    if missing:
        raise CheckFailed(f"fit: give a score for every node ({', '.join(missing)} missing)",
                          expected=sorted(truth["fit"]), observed=sorted(map(str, fit)))
    scores = {n: _int(fit[n]) for n in truth["fit"]}
    bad = [n for n, v in scores.items() if v is None or not 0 <= v <= fw.MAX_NODE_SCORE]
    if bad:
        raise CheckFailed(f"fit: each score is a whole number from 0 to 100 "
                          f"({'that of' if len(bad) == 1 else 'those of'} {', '.join(bad)} "
                          f"{'is' if len(bad) == 1 else 'are'} not)",
                          expected="0..100", observed={n: fit[n] for n in bad})
    wrong = (["node"] if node != truth["node"] else []) + [f"fit of {n}" for n in truth["fit"] if scores[n] != truth["fit"][n]]
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, 1 + len(truth["fit"]), "parts", advice="work out each node's "
                                            "requested CPU and memory with the incoming Pod, then each plugin's "
                                            "score and weight (see the hints)") + note,
                          expected="the node chosen and each node's NodeResourcesFit score", right_answer=truth)
    return ctx.passed(f"the default profile binds {ctx.params['pod']} to {node}, as you predicted, with the "
                      "NodeResourcesFit scores you worked out" + note)


def check_score_predict(ctx):
    return judge_score_predict(ctx, observe_score_predict(ctx))


# -- preempt-predict ---------------------------------------------------------------------------------

def preempt_truth(case: dict) -> dict:
    cycle = _cycle(case)
    return {"node": cycle.nominated_node, "victims": sorted(v.name for v in cycle.victims)}


def observe_preempt_predict(ctx):
    answer, note = _prediction(ctx)
    return {"answer": answer, "note": note, "tried": _live_try(ctx)}


def judge_preempt_predict(ctx, obs):
    answer, note = obs["answer"], obs["note"]
    case = _case(ctx)
    truth = preempt_truth(case)
    nodes = [n["name"] for n in case["nodes"]]
    pods = {p["name"]: p.get("nodeName") for p in case.get("pods") or []}
    node = str(ctx.answer_field(answer, "node", str)).strip()
    victims = [str(v).strip() for v in ctx.answer_field(answer, "victims", list)]
    if obs.get("tried"):
        return _tried_feedback(ctx, obs["tried"])
    if node not in nodes:
        raise CheckFailed(f"node: {node!r} is not a node of the case", expected=nodes, observed=node)
    unknown = [v for v in victims if v not in pods]
    if unknown:
        what = "is not a Pod" if len(unknown) == 1 else "are not Pods"
        if all("/" in v and v.rsplit("/", 1)[-1] in pods for v in unknown):
            # the case's Pods with a namespace before their names: a form the case never has, not a
            # wrong prediction (not counted)
            raise AnswerMalformed(f"victims: {', '.join(unknown)} {what} of the case as it names them: write each "
                                  "Pod's name as the case file does, without a namespace", expected=sorted(pods),
                                  observed=victims)
        raise CheckFailed(f"victims: {', '.join(unknown)} {what} of the case", expected=sorted(pods),
                          observed=victims)
    elsewhere = [v for v in victims if pods[v] != node]
    if elsewhere:
        raise CheckFailed(f"victims: {', '.join(elsewhere)} do not run on {node}: preemption evicts Pods of the "
                          "nominated node only", expected=f"Pods on {node}", observed=victims)
    wrong = (["node"] if node != truth["node"] else []) + (["victims"] if sorted(victims) != truth["victims"] else [])
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, 2, "parts", advice="on each node, take away the lower-priority "
                                            "Pods, put back what still leaves room, then compare the nodes (see the "
                                            "hints)") + note,
                          expected="the nominated node and the Pods evicted there", right_answer=truth)
    return ctx.passed(f"DefaultPreemption nominates {node} and evicts {', '.join(truth['victims'])}, as you "
                      "predicted" + note)


def check_preempt_predict(ctx):
    return judge_preempt_predict(ctx, observe_preempt_predict(ctx))


# -- node-name ---------------------------------------------------------------------------------------

SCHEDULER_USER = "system:kube-scheduler"        # the identity the lab's scheduler binds with


LABKIT_AGENT = "labkit"          # the user agent of labkit's own client (labkit.apiserver.client)


def _another_exercises_taint(lab, event: dict) -> bool:
    """Whether an audited write of a Node only sets taints that another exercise asks for (as
    `kubectl taint` patches spec.taints): PreferNoSchedule taints on node-f (taint-effects), the
    drain taint on node-e (noexecute), besides the taints the lab built the Node with. Such a
    write is that exercise's work, not a way to steer nightly."""
    ref, body = event.get("objectRef") or {}, event.get("requestObject")
    if event.get("verb") != "patch" or ref.get("subresource") or not isinstance(body, dict) \
            or set(body) != {"spec"} or set(body["spec"] or {}) != {"taints"}:
        return False
    name = ref.get("name")
    built = [{k: t[k] for k in ("key", "value", "effect") if k in t}
             for t in ((_lab_nodes(lab).get(name) or {}).get("spec") or {}).get("taints") or []]

    def allowed(taint: dict) -> bool:
        taint = {k: taint[k] for k in ("key", "value", "effect") if taint.get(k)}
        return taint in built or _other_exercises_taint(lab, name, taint)
    return all(isinstance(t, dict) and allowed(t) for t in body["spec"]["taints"] or [])


def _other_exercises_taint(lab, name: str, taint: dict) -> bool:
    """A taint another exercise asks for: PreferNoSchedule on node-f (taint-effects), the drain
    taint on node-e (noexecute)."""
    taint = {k: taint[k] for k in ("key", "value", "effect") if taint.get(k)}
    return (name == lab.RETIRING_NODE["metadata"]["name"] and taint.get("effect") == "PreferNoSchedule") \
        or (name == lab.DRAIN_NODE["metadata"]["name"] and taint == lab.DRAIN_TAINT)


def _as_built(lab, name: str, live: dict | None) -> bool:
    """Whether a Node the lab registers is now as the lab built it (taints, labels, allocatable
    resources, spec.unschedulable), but for taints another exercise asks for: writes that left it so
    (another exercise's trial and error, undone) gave nightly no node it would not have had."""
    built = {**_lab_nodes(lab), **lab.ZONE_NODES, **lab.PACK_NODES}.get(name)
    now = _node_view(live)
    if built is None or now is None:
        return False
    built = _node_view(built)
    now["taints"] = [t for t in now["taints"] if t in built["taints"] or not _other_exercises_taint(lab, name, t)]
    return now == built


def observe_node_name(ctx):
    """The Pod nightly (its node, requests, phase and rejection), who bound it since it was last
    created (the audit log: a successful POST of its binding after its last create), the Nodes
    and the other Pods of the namespace the student changed or deleted since the part was built
    (the audit log), and what the Filter plugins read of its node."""
    from labkit.apiserver.audit import received_at
    p = ctx.params
    target = for_env(ctx.env)
    client = target.client()

    def pod():
        live = client.get_or_none("v1", "pods", p["pod"], p["namespace"])
        if live is None:
            return None
        status = live.get("status") or {}
        return {**_bound_view(live), "phase": status.get("phase"), "reason": status.get("reason"),
                "message": status.get("message"), "terminating": bool(live["metadata"].get("deletionTimestamp"))}
    seen = pod()
    if seen is not None and not seen["nodeName"] and seen["phase"] != "Failed":
        # made again without a node: the scheduler binds it on its next attempt
        wait_for(lambda: (pod() or {}).get("nodeName"), timeout=BRIEF, interval=0.1)
        seen = pod()
    def audited():
        return [e for e in target.audit(since=ctx.ready_time) or []
                if (e.get("responseStatus") or {}).get("code", 500) < 300]

    def binding_audited(events):
        return any(e.get("verb") == "create" and _is_binding(e.get("objectRef") or {})
                   and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                   and (e.get("objectRef") or {}).get("name") == p["pod"] for e in events)
    events = audited()
    if seen is not None and seen["nodeName"] and not binding_audited(events):
        # a binding's audit line is written once its response has been sent: on a loaded machine the
        # bound Pod was read before it, and a scheduler's binding looked like a node given by hand
        wait_for(lambda: binding_audited(audited()), timeout=BRIEF, interval=0.1)
        events = audited()
    created = max((received_at(e) for e in events if e.get("verb") == "create"
                   and (e.get("objectRef") or {}).get("resource") == "pods"
                   and not (e.get("objectRef") or {}).get("subresource")
                   and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                   and (e.get("objectRef") or {}).get("name") == p["pod"]), default=0.0)
    bound_by = sorted({(e.get("user") or {}).get("username", "") for e in events
                       if e.get("verb") == "create" and _is_binding(e.get("objectRef") or {})
                       and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                       and (e.get("objectRef") or {}).get("name") == p["pod"] and received_at(e) >= created})
    # the student's writes: not the cluster's components (system:), nor labkit's own building of the
    # lab (user agent `labkit`: `labkit run`, and a reset of another exercise, which builds node-a..d
    # and web again as they were)
    mine = [e for e in events if not (e.get("user") or {}).get("username", "").startswith("system:")
            and e.get("userAgent") != LABKIT_AGENT and e.get("verb") in ("create", "update", "patch", "delete")]
    # the lab's Nodes, and any other that exists now: a Node made and deleted again since leaves the
    # cluster's Nodes as they were (if nightly went there, its node is gone: judged below)
    counted = set(_lab_nodes(_lab(ctx))) | set(_lab(ctx).ZONE_NODES) | set(_lab(ctx).PACK_NODES) | \
        {n["metadata"]["name"] for n in client.list("v1", "nodes")[0]}
    nodes_changed = sorted({(e.get("objectRef") or {}).get("name") for e in mine
                            if (e.get("objectRef") or {}).get("resource") == "nodes"
                            and not _another_exercises_taint(_lab(ctx), e)} & counted)
    nodes_changed = [n for n in nodes_changed if not _as_built(_lab(ctx), n, client.get_or_none("v1", "nodes", n))]
    deleted = sorted({(e.get("objectRef") or {}).get("name") for e in mine if e.get("verb") == "delete"
                      and (e.get("objectRef") or {}).get("resource") == "pods"
                      and not (e.get("objectRef") or {}).get("subresource")
                      and (e.get("objectRef") or {}).get("namespace") == p["namespace"]
                      and (e.get("objectRef") or {}).get("name") != p["pod"]} - {None})
    # a Pod deleted and made again under its name since (web, recreated for why-pending's tolerations;
    # binpack's batch, made again for bin-packer) made no room: only those still gone count
    present = {x["metadata"]["name"] for x in client.list("v1", "pods", p["namespace"])[0]
               if not x["metadata"].get("deletionTimestamp")}
    deleted = [n for n in deleted if n not in present]
    # a Pod the student made since the part was built (a scratch copy for another exercise's
    # experiment) and deleted again is no other workload: the namespace's Pods are as they were
    first: dict[str, dict] = {}
    for e in sorted((e for e in events if e.get("verb") in ("create", "delete")
                     and (e.get("objectRef") or {}).get("resource") == "pods"
                     and not (e.get("objectRef") or {}).get("subresource")
                     and (e.get("objectRef") or {}).get("namespace") == p["namespace"]), key=received_at):
        first.setdefault((e.get("objectRef") or {}).get("name"), e)
    made_by_student = {name for name, e in first.items() if e.get("verb") == "create" and any(e is m for m in mine)}
    deleted = [n for n in deleted if n not in made_by_student]
    deleted_by = _deleters_since_created(ctx, p["namespace"], p["pod"]) if (seen or {}).get("terminating") else []
    node_name = (seen or {}).get("nodeName")
    live = client.get_or_none("v1", "nodes", node_name) if node_name else None
    try:
        answer, unanswered = ctx.answer(), None
    except CheckFailed as exc:          # judged after the live state: a wrong fix is named first
        answer, unanswered = None, exc.message
    return {"answer": answer, "unanswered": unanswered,
            "pod": seen, "bound_by": bound_by, "nodes_changed": nodes_changed, "deleted": deleted,
            "deleted_by": deleted_by,
            "placement": _placement(client, live, node_name, p["namespace"], p["pod"])}


def _reading_not_wrong(obs, truth) -> bool:
    """Whether the answer is no wrong answer whatever the fix: missing or malformed (not judged), or
    right. A failure of the fix beside it then counts no wrong answer (run_check)."""
    answer = obs["answer"]
    if obs["unanswered"]:
        return True
    if not isinstance(answer, dict):
        return False
    return str(answer.get("reason", "")).strip() == truth["reason"] and \
        all(_int(answer.get(k)) == truth[k] for k in ("requested", "used", "capacity"))


def judge_node_name(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["pod"]
    lab = _lab(ctx)
    # the fix is judged first: beside a right reading, its failure is no wrong answer
    ctx.answer_not_wrong = _reading_not_wrong(obs, rejection_truth(lab))
    if not ctx.answer_not_wrong and isinstance(obs["answer"], dict):
        # a wrong reading is counted as the reading it is, whatever the fix beside it says: the
        # same answer file is one wrong answer, not one more each time the fix's failure changes
        ctx.count_wrong_answer()
    reset = f"`labkit reset scheduler {ctx.exercise.id}` to start over"
    pod = obs["pod"]
    if pod is None:
        raise CheckFailed(f"there is no Pod {name} in namespace {ns}: the workload is to run, with the requests it "
                          f"had ({reset})")
    built = _bound_view({"metadata": {"name": name, "namespace": ns}, "spec": lab.NIGHTLY["spec"]})
    if pod["requests"] != built["requests"]:
        return ctx.failed(f"the resource requests of {name} changed: the workload needs what it asked for; a Pod "
                          "that asks for less than it uses is not one that fits. Keep its requests and find it a "
                          f"node that has room ({reset})", expected="the requests as the lab made them",
                          observed=pod["requests"], observed_in=LIVE)
    if obs["nodes_changed"]:
        return ctx.failed(f"you changed the Node(s) {', '.join(obs['nodes_changed'])} (the audit log has it): "
                          "the task is to place the Pod, not to change the nodes (taints, cordons, capacity); "
                          "put them back as they were", expected="no Node changed",
                          observed=obs["nodes_changed"], observed_in=LIVE)
    if obs["deleted"]:
        return ctx.failed(f"you deleted the Pod(s) {', '.join(obs['deleted'])} of {ns} (the audit log has it): "
                          "other workloads are not to make room for this one; there are nodes with room for it "
                          "as they are", expected="no other Pod deleted", observed=obs["deleted"], observed_in=LIVE)
    rejected = (f", and the kubelet admission of {pod['nodeName']} rejected it (its status says why)"
                if pod["phase"] == "Failed" else "")
    if pod["nodeName"] and SCHEDULER_USER not in obs["bound_by"]:
        how = (f"a binding sent by {', '.join(obs['bound_by'])}" if obs["bound_by"]
               else "spec.nodeName set when it was created")
        return ctx.failed(f"{name} was given {pod['nodeName']} by hand ({how}): no scheduler judged that node"
                          f"{rejected}. Read the Pod's status and events (`kubectl describe pod {name} -n {ns}`); "
                          "let the scheduler choose a node for it", expected="bound by the scheduler",
                          observed=f"on {pod['nodeName']}, {how}", observed_in=LIVE)
    if pod["phase"] == "Failed":
        return ctx.failed(f"{name} is Failed{rejected}: a Failed Pod never runs again; read `kubectl describe "
                          f"pod {name} -n {ns}`", expected="a Pod that is not Failed", observed="Failed",
                          observed_in=LIVE)
    if pod.get("terminating"):
        return _terminating_failure(ctx, name, obs.get("deleted_by") or [], reset)
    if not pod["nodeName"]:
        return ctx.failed(f"{name} is not bound to a node yet: if the scheduler cannot place it, its condition "
                          f"PodScheduled and a FailedScheduling event say why (`kubectl describe pod {name} -n {ns}`)",
                          expected="bound by the scheduler", observed="no node", observed_in=LIVE)
    problem = _filter_problem(pod, obs.get("placement"))
    if problem:
        return ctx.failed(f"{name} is on {pod['nodeName']}, where kube-scheduler's Filter plugins would not put it "
                          f"({problem}) ({reset})", expected="a node that passes Filter for the Pod",
                          observed=f"{pod['nodeName']}: {problem}", observed_in=LIVE)
    if obs["unanswered"]:
        raise CheckFailed(obs["unanswered"])
    answer = obs["answer"]
    if not isinstance(answer, dict):
        raise CheckFailed("write a mapping with reason, requested, used and capacity", expected="a mapping",
                          observed=answer)
    truth = rejection_truth(lab)
    reason = str(ctx.answer_field(answer, "reason", str)).strip()
    figures = {}
    for key in ("requested", "used", "capacity"):
        value = ctx.answer_field(answer, key, (int, str))
        figures[key] = _int(value)
        if figures[key] is None or figures[key] < 0:
            raise CheckFailed(f"{key}: a whole number, as the message writes it", expected="a whole number",
                              observed=value)
    wrong = (["reason"] if reason != truth["reason"] else []) + [k for k in figures if figures[k] != truth[k]]
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, 4, "entries", noun="reading", advice="read the status reason "
                                            f"and message of the Pod {name} as the lab made it (`labkit reset "
                                            f"scheduler {ctx.exercise.id}` makes it again; write down what you "
                                            "read before you fix it)"),
                          expected="the rejection as node-c's kubelet admission wrote it", right_answer=truth)
    return ctx.passed(f"{name} was bound to {pod['nodeName']} by the scheduler, a node where it fits next to the "
                      "Pods there, with the requests it asked for; and you read the kubelet's rejection right")


def rejection_truth(lab) -> dict:
    """The rejection of the Pod nightly as the lab makes it, by labkit's reconstruction of kubelet
    admission (labkit.controllers.kubeletadmit, after pkg/kubelet/lifecycle/predicate.go Admit and
    the scheduler's noderesources fitsRequest): the first insufficient resource of the Pod on its
    node, with no Pod admitted there before it."""
    from labkit.controllers.kubeletadmit import insufficient, rejection
    from labkit.scheduler.objects import Node
    found = insufficient(Pod(lab.NIGHTLY), Node(lab.PENDING_NODES[lab.PINNED_NODE]), [])
    _resource, requested, used, capacity = found
    return {"reason": rejection(found)[0], "requested": requested, "used": used, "capacity": capacity}


def check_node_name(ctx):
    return judge_node_name(ctx, observe_node_name(ctx))


# -- spread ------------------------------------------------------------------------------------------

ROLLOUT_WAIT = 5.0      # seconds the check waits for a rollout of shop in progress to settle
# the Pod fields the default profile's PreFilter and Filter plugins read (labkit.scheduler.objects.Pod)
_SCHED_SPEC = ("nodeName", "nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "overhead",
               "schedulerName", "priority")


def _sched_view(pod: dict) -> dict:
    """What of a Pod the scheduling cycle reads, in the API's shape (labkit.scheduler.objects.Pod
    takes it): its name, namespace, labels and whether it terminates; the spec fields the
    plugins read, and each container's requests and host ports."""
    meta, spec = pod["metadata"], pod.get("spec") or {}

    def containers(key):
        return [{"name": c.get("name"), "resources": {"requests": (c.get("resources") or {}).get("requests") or {}},
                 "ports": [p for p in c.get("ports") or [] if p.get("hostPort")]} for c in spec.get(key) or []]
    return {"metadata": {"name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                         "labels": dict(meta.get("labels") or {}),
                         "deletionTimestamp": meta.get("deletionTimestamp")},
            "spec": {**{k: spec[k] for k in _SCHED_SPEC if k in spec},
                     "containers": containers("containers"), "initContainers": containers("initContainers")},
            "status": {"phase": (pod.get("status") or {}).get("phase"),
                       "tried": any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                                    for c in (pod.get("status") or {}).get("conditions") or [])}}


def _deployment_view(dep: dict | None) -> dict | None:
    if dep is None:
        return None
    template = (dep.get("spec") or {}).get("template") or {}
    spec = template.get("spec") or {}
    return {"uid": dep["metadata"].get("uid"), "replicas": (dep.get("spec") or {}).get("replicas"),
            "labels": dict((template.get("metadata") or {}).get("labels") or {}),
            "constraints": spec.get("topologySpreadConstraints"),
            "nodeSelector": spec.get("nodeSelector") or {}, "tolerations": spec.get("tolerations") or [],
            "requests": [((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or []]}


def observe_spread(ctx):
    """The Deployment shop (its template's constraint, replicas, requests, nodeSelector and
    tolerations), its Pods (through its ReplicaSets), the pool's Nodes, the labels of every other
    Pod of the namespace, what the scheduler reads of every Node and bound Pod, the bindings of
    shop's Pods sent by hand (the audit log), and the answer. A rollout in progress (fewer or more
    Pods than replicas, some of another template, terminating, or not tried by the scheduler yet)
    is waited for, at most ROLLOUT_WAIT s."""
    p = ctx.params
    lab = _lab(ctx)
    target = for_env(ctx.env)
    client = target.client()
    ns = p["namespace"]

    def look():
        dep = _deployment_view(client.get_or_none("apps/v1", "deployments", p["deployment"], ns))
        owners = {rs["metadata"]["uid"] for rs in client.list("apps/v1", "replicasets", ns)[0]
                  if dep and any(r.get("uid") == dep["uid"] for r in rs["metadata"].get("ownerReferences") or [])}
        pods = client.list("v1", "pods")[0]
        mine = [_sched_view(x) for x in pods if x["metadata"].get("namespace") == ns
                and any(r.get("uid") in owners for r in x["metadata"].get("ownerReferences") or [])]
        return dep, mine, pods

    def settled(dep, mine) -> bool:
        return dep is not None and len(mine) == dep["replicas"] and all(
            not x["metadata"]["deletionTimestamp"] and x["spec"].get("topologySpreadConstraints") == dep["constraints"]
            and (x["spec"].get("nodeName") or x["status"]["tried"]) for x in mine)
    dep, mine, pods = look()
    if not settled(dep, mine):
        wait_for(lambda: settled(*look()[:2]), timeout=ROLLOUT_WAIT, interval=0.1)
        dep, mine, pods = look()
    names = {x["metadata"]["name"] for x in mine}
    nodes = sorted(client.list("v1", "nodes")[0], key=lambda n: n["metadata"]["name"])
    by_hand = sorted({(e.get("user") or {}).get("username", "") for e in target.audit(since=ctx.ready_time) or []
                      if e.get("verb") == "create" and _is_binding(e.get("objectRef") or {})
                      and (e.get("objectRef") or {}).get("namespace") == ns
                      and (e.get("objectRef") or {}).get("name") in names
                      and not (e.get("user") or {}).get("username", "").startswith("system:")
                      and (e.get("responseStatus") or {}).get("code", 500) < 300})
    cart = next((x for x in pods if x["metadata"].get("namespace") == ns and x["metadata"]["name"] == "cart"), None)
    try:        # the answer as it was when `labkit scheduler explain` first showed such a decision, if it did
        (answer, note), unanswered = predictions.graded_answer(ctx), None
    except CheckFailed as exc:          # judged after the live state: a wrong constraint is named first
        answer, note, unanswered = None, "", exc.message
    return {"deployment": dep, "pods": sorted(mine, key=lambda x: x["metadata"]["name"]),
            "nodes": {name: _node_view(next((n for n in nodes if n["metadata"]["name"] == name), None))
                      for name in lab.ZONE_NODES},
            "cart": None if cart is None else {"labels": dict(cart["metadata"].get("labels") or {}),
                                               "nodeName": (cart.get("spec") or {}).get("nodeName")},
            "other_labels": [dict(x["metadata"].get("labels") or {}) for x in pods
                             if x["metadata"].get("namespace") == ns and x["metadata"]["name"] not in names],
            "cluster": {"nodes": [_filter_node(n) for n in nodes],
                        "pods": [_sched_view(x) for x in pods if (x.get("spec") or {}).get("nodeName")
                                 and (x.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]},
            "bound_by_hand": by_hand, "answer": answer, "note": note, "unanswered": unanswered}


def selector_space(lab, template_labels: dict, own: list[dict], others: list[dict]) -> tuple[list[dict], list[dict]]:
    """The label sets a spread constraint's selector is judged on: those it must match (shop's
    Pods, and its template's labels) and those it must not: every other Pod of the namespace, live
    and as the lab builds it, a Pod without labels, and one of each of the labels shop's Pods share
    with cart (tier=frontend) or name their app by (app=cart)."""
    must = [dict(template_labels)] + [dict(x) for x in own]
    built = [lab.CART, lab.WEB, lab.LEGACY, lab.NIGHTLY, *(lab.drain_pod(n) for n in lab.DRAIN_PODS),
             *(lab.job_pod(n) for n in lab.JOBS)]
    near = [{}, {"tier": "frontend"}, {"app": "cart"}]
    must_not = []
    for x in [*others, *(b["metadata"].get("labels") or {} for b in built), *near]:
        if x not in must and x not in must_not:
            must_not.append(dict(x))
    return must, must_not


def _spread_constraint_problem(ctx, dep: dict, own_labels: list[dict], others: list[dict]) -> tuple | None:
    """What is wrong with the template's spread constraint, as (message, expected, observed), or
    None. Judged over the space the exercise covers: the pool's three zones, shop's Pods and the
    label sets of selector_space."""
    from labkit.scheduler.objects import label_selector_matches
    from labkit.scheduler.plugins import _selector_of
    lab = _lab(ctx)
    constraints = dep["constraints"] or []
    where = "the Deployment's spec.template.spec.topologySpreadConstraints"
    if not constraints:
        return (f"shop's Pod template has no topologySpreadConstraints: the scheduler places each replica where "
                f"the scores say, whatever the zone (`kubectl get pods -n {ctx.params['namespace']} -l app=shop -o "
                "wide`). Add one to " + where, "one constraint", "none")
    if len(constraints) > 1:
        return (f"{where} holds {len(constraints)} constraints: the task is one, over the zones; each further "
                "one also filters nodes", "one constraint", constraints)
    c = constraints[0]
    if c.get("topologyKey") != lab.ZONE_KEY:
        return (f"the constraint's topologyKey is {c.get('topologyKey')!r}: it spreads over the values of that "
                "node label, not over the zones (`kubectl get nodes -l pool=shop --show-labels`)",
                "the zone label", c.get("topologyKey"))
    if c.get("whenUnsatisfiable") != "DoNotSchedule":
        return (f"the constraint's whenUnsatisfiable is {c.get('whenUnsatisfiable')!r}: a constraint that is not "
                "DoNotSchedule is only scored (PodTopologySpread Score), never filtered, so nothing stops a zone "
                "from holding more", "DoNotSchedule", c.get("whenUnsatisfiable"))
    if _int(c.get("maxSkew")) != 1:
        return (f"the constraint's maxSkew is {c.get('maxSkew')!r}: it lets one zone hold that many replicas more "
                "than the emptiest, more than the task allows", "the skew the task asks for", c.get("maxSkew"))
    zones = len({n["metadata"]["labels"][lab.ZONE_KEY] for n in lab.ZONE_NODES.values()})
    if c.get("minDomains") is not None and (_int(c["minDomains"]) or 0) > zones:
        return (f"the constraint's minDomains is {c['minDomains']}, more zones than the pool has ({zones}): the "
                "Filter then takes the global minimum as 0 and fewer replicas fit (filtering.go minMatchNum)",
                f"no minDomains, or at most {zones}", c["minDomains"])
    pod = Pod({"metadata": {"labels": own_labels[0] if own_labels else dep["labels"]}, "spec": {}})
    selector = _selector_of(pod, c)
    if selector is None:
        return ("the constraint has no labelSelector: it then counts no Pod in any zone (a nil selector matches "
                "nothing, podtopologyspread/common.go), so every zone looks empty and nothing is spread",
                "a labelSelector of shop's Pods", None)
    must, must_not = selector_space(lab, dep["labels"], own_labels, others)
    missed = [x for x in must if not label_selector_matches(_selector_of(Pod({"metadata": {"labels": x}, "spec": {}}), c), x)]
    if missed:
        shown = ",".join(f"{k}={v}" for k, v in sorted(missed[0].items()))
        return (f"the constraint's labelSelector does not match shop's own Pods (labels {shown}): they are "
                "what it is to count per zone (`kubectl get pods -n sched --show-labels`)",
                "a selector matching shop's Pods", c.get("labelSelector"))
    if not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return ("the constraint's labelSelector is empty: an empty selector counts no Pod (podtopologyspread/"
                "common.go countPodsMatchSelector), so every zone looks empty and nothing is spread",
                "a labelSelector of shop's Pods", c.get("labelSelector"))
    extra = [x for x in must_not if label_selector_matches(selector, x)]
    if extra:
        shown = ", ".join(",".join(f"{k}={v}" for k, v in sorted(x.items())) or "(no labels)" for x in extra[:3])
        return (f"the constraint's labelSelector also matches Pods that are not shop's (labels {shown}): the "
                "Filter would count them in their zones too. Select by what only shop's Pods carry "
                "(`kubectl get pods -n sched --show-labels`)", "a selector of shop's Pods only",
                c.get("labelSelector"))
    return None


# the count FitError puts before a reason, and the "node(s)" many reasons begin with
# (podtopologyspread ErrReasonConstraintsNotMatch, nodeaffinity ErrReasonPod, ...): the message
# reads "3 node(s) didn't match ...", and a student who writes the reason without them means it
_COUNT_PREFIX = __import__("re").compile(r"^(\d+\s+)?(node\(s\)\s+)?", __import__("re").IGNORECASE)


def _reason_text(value) -> str:
    """A reason as a student may write it: as the message words it, with or without its count,
    its leading "node(s)" and final period, in any case."""
    text = " ".join(str(value).split()).strip().rstrip(".").strip()
    return _COUNT_PREFIX.sub("", text).lower()


def spread_truth(ctx, obs) -> tuple[dict | None, list[str]]:
    """labkit's reconstruction of the default profile on the live Nodes and bound Pods: for the
    first of shop's Pending Pods, the zone counts PodTopologySpread's PreFilter made
    (filtering.go calPreFilterState) and each pool node's Filter reasons; and the names of
    shop's Pending Pods the reconstruction would bind (the scheduler has not tried them again)."""
    from labkit.scheduler.objects import Node, NodeInfo
    lab = _lab(ctx)
    nodes = [NodeInfo(Node(n)) for n in obs["cluster"]["nodes"]]
    by_name = {n.name: n for n in nodes}
    for x in obs["cluster"]["pods"]:
        if x["spec"].get("nodeName") in by_name:
            by_name[x["spec"]["nodeName"]].add(Pod(x))
    pending = [x for x in obs["pods"] if not x["spec"].get("nodeName")]
    placeable, truth = [], None
    for x in pending:
        cycle = fw.schedule(make_profile("default"), nodes, Pod(x), rng=random.Random(0))
        if cycle.chosen is not None:
            placeable.append(x["metadata"]["name"])
        elif truth is None:
            counts = (cycle.state.get("PodTopologySpread") or (None, [{}]))[1]
            truth = {"zones": dict(sorted((counts[0] if counts else {}).items())),
                     "nodes": {n: ", ".join(cycle.statuses[n].reasons) if n in cycle.statuses else "fits"
                               for n in lab.ZONE_NODES}}
    return truth, placeable


def _placement_problem(obs) -> str | None:
    """Why the Filter plugins (labkit's reconstruction) reject one of shop's bound Pods on its node,
    next to every other Pod bound in the cluster; None when each passes."""
    from labkit.scheduler.objects import Node, NodeInfo
    for x in obs["pods"]:
        node_name = x["spec"].get("nodeName")
        if not node_name:
            continue
        nodes = [NodeInfo(Node(n)) for n in obs["cluster"]["nodes"]]
        by_name = {n.name: n for n in nodes}
        if node_name not in by_name:
            return f"{x['metadata']['name']} is bound to {node_name}, which is no Node"
        for other in obs["cluster"]["pods"]:
            if other["spec"].get("nodeName") in by_name and other["metadata"]["uid"] != x["metadata"]["uid"]:
                by_name[other["spec"]["nodeName"]].add(Pod(other))
        pod = Pod(x)
        cycle = fw.Cycle(pod, make_profile("default"), nodes, [])
        st = fw.run_pre_filters(cycle, pod)
        if st.ok:
            st = fw.run_filters(cycle, pod, by_name[node_name])
        if not st.ok:
            return f"{x['metadata']['name']} on {node_name}: {st.plugin}: {'; '.join(st.reasons)}"
    return None


def _constraints_as_created(constraints, pod: dict):
    """The template's topologySpreadConstraints as the API server stores them in a Pod it creates
    from it: each constraint's matchLabelKeys merged into its labelSelector with the Pod's own label
    values (pkg/registry/core/pod/strategy.go mutateTopologySpreadConstraints; labkit's API server:
    merge_label_keys). A Pod of the current template compares equal to this, not to the template."""
    from labkit.apiserver.registry.pod import merge_label_keys
    made = {"metadata": {"labels": copy.deepcopy((pod.get("metadata") or {}).get("labels") or {})},
            "spec": {"topologySpreadConstraints": copy.deepcopy(constraints)}}
    merge_label_keys(made)
    return made["spec"]["topologySpreadConstraints"]


def judge_spread(ctx, obs):
    p = ctx.params
    ns, name = p["namespace"], p["deployment"]
    lab = _lab(ctx)
    reset = f"`labkit reset scheduler {ctx.exercise.id}` to start over"
    # the live work is judged first: while it fails, the answer (about the outcome of the right
    # constraint) is not judged, and is no wrong answer (run_check)
    ctx.answer_not_wrong = True
    changed = _changed_nodes(lab, obs["nodes"], lab.ZONE_NODES)
    if changed:
        return ctx.failed(f"the Node(s) {', '.join(changed)} changed: the task is to spread the Deployment over the "
                          f"zones as they are ({reset})", expected="the pool's Nodes as the lab registered them",
                          observed=changed, observed_in=LIVE)
    dep = obs["deployment"]
    if dep is None:
        raise CheckFailed(f"there is no Deployment {name} in namespace {ns}: {reset}")
    built = _deployment_view(lab.SHOP)
    if dep["replicas"] != built["replicas"]:
        return ctx.failed(f"{name} asks for {dep['replicas']} replicas: keep its {built['replicas']}; the one that "
                          "stays Pending is to be explained, not scaled away", expected=built["replicas"],
                          observed=dep["replicas"], observed_in=LIVE)
    fields = [k for k in ("requests", "nodeSelector", "tolerations") if dep[k] != built[k]]
    if fields:
        return ctx.failed(f"the {', '.join(fields)} of {name}'s Pod template changed: keep them (its Pods need "
                          "1 CPU each and the pool's nodes); add the spread constraint and nothing else",
                          expected={k: built[k] for k in fields}, observed={k: dep[k] for k in fields},
                          observed_in=LIVE)
    if obs["cart"] is None or obs["cart"]["labels"] != lab.CART["metadata"]["labels"]:
        return ctx.failed(f"the Pod cart is gone or its labels changed: it is another team's Pod; leave it as it is "
                          f"({reset})", expected=lab.CART["metadata"]["labels"],
                          observed=(obs["cart"] or {}).get("labels", "gone"), observed_in=LIVE)
    problem = _spread_constraint_problem(ctx, dep, [x["metadata"]["labels"] for x in obs["pods"]],
                                         obs["other_labels"])
    if problem:
        message, expected, observed = problem
        return ctx.failed(message, expected=expected, observed=observed, observed_in=LIVE)
    pods = obs["pods"]
    if len(pods) != dep["replicas"] or any(x["metadata"]["deletionTimestamp"]
                                           or x["spec"].get("topologySpreadConstraints")
                                           != _constraints_as_created(dep["constraints"], x)
                                           for x in pods):
        return ctx.error(f"{name}'s rollout is still in progress ({len(pods)} Pods of its ReplicaSets for "
                         f"{dep['replicas']} replicas, some of an older template or terminating): check again in a "
                         "moment")
    if obs["bound_by_hand"]:
        return ctx.failed(f"some of {name}'s Pods were bound by hand (a POST of their binding by "
                          f"{', '.join(obs['bound_by_hand'])}): the scheduler is to place them ({reset})",
                          expected="bound by the scheduler", observed=obs["bound_by_hand"], observed_in=LIVE)
    problem = _placement_problem(obs)
    if problem:
        return ctx.failed(f"one of {name}'s Pods is where kube-scheduler's Filter plugins would not put it "
                          f"({problem}) ({reset})", expected="each Pod on a node that passes Filter for it",
                          observed=problem, observed_in=LIVE)
    truth, placeable = spread_truth(ctx, obs)
    if placeable:
        return ctx.error(f"{', '.join(placeable)} fit a node now but the scheduler has not tried again yet (its "
                         "backoff is at most 10 s): check again in a few seconds")
    if truth is None:
        return ctx.failed(f"no replica of {name} is Pending: with the constraint the task asks for, one replica has "
                          "nowhere to go in this pool; read `kubectl get pods -n sched -l app=shop -o wide`",
                          expected="one replica Pending", observed="none", observed_in=LIVE)
    if obs["unanswered"]:       # missing or malformed: not judged either
        raise CheckFailed(obs["unanswered"])
    ctx.answer_not_wrong = False
    answer = obs["answer"]
    zones = ctx.answer_field(answer, "zones", dict)
    reasons = ctx.answer_field(answer, "nodes", dict)
    for key, known, what in (("zones", truth["zones"], "zone"), ("nodes", truth["nodes"], "node of the pool")):
        given = {str(k) for k in (zones if key == "zones" else reasons)}
        unknown, missing = sorted(given - set(known)), [k for k in known if k not in given]
        if unknown or missing:
            raise CheckFailed(f"{key}: give each {what} once: "
                              + "; ".join(([f"{', '.join(unknown)} is not one"] if unknown else [])
                                          + ([f"{', '.join(missing)} missing"] if missing else [])),
                              expected=sorted(known), observed=sorted(given))
    counts = {str(k): _int(v) for k, v in zones.items()}
    bad = [k for k, v in counts.items() if v is None or v < 0]
    if bad:
        raise CheckFailed(f"zones: each count is a whole number ({', '.join(bad)} is not)", expected="0, 1, 2, ...",
                          observed={k: zones[k] for k in bad})
    wrong = [f"zones.{z}" for z in truth["zones"] if counts[z] != truth["zones"][z]] + \
            [f"nodes.{n}" for n in truth["nodes"]
             if _reason_text({str(k): v for k, v in reasons.items()}[n]) != _reason_text(truth["nodes"][n])]
    if wrong:
        return ctx.failed(ctx.grid_feedback(wrong, len(truth["zones"]) + len(truth["nodes"]), "entries",
                                            noun="explanation", advice="count shop's Pods per zone with `kubectl "
                                            "get pods -o wide` and the nodes' zone labels, then work out, node by node, "
                                            "the first Filter plugin that rejects the Pending replica (see the hints)")
                          + obs.get("note", ""),
                          expected="the zone counts and each pool node's Filter reason", right_answer=truth)
    return ctx.passed(f"{name}'s replicas are spread over the zones with at most one more in any zone, and you "
                      "explained the Pending one as the Filter plugins decide it" + obs.get("note", ""))


def check_spread(ctx):
    return judge_spread(ctx, observe_spread(ctx))


# -- binpack -----------------------------------------------------------------------------------------

def observe_binpack(ctx):
    """The pool's Nodes, the scheduler's configuration (the ConfigMap's text), the batch's Pods
    (what the scheduling cycle reads of each), and who bound each since the part was built (the
    audit log). A batch just created is given BRIEF s to be bound."""
    lab = _lab(ctx)
    target = for_env(ctx.env)
    client = target.client()
    ns = ctx.params["namespace"]

    def batch():
        return {name: (lambda x: None if x is None else _sched_view(x))(client.get_or_none("v1", "pods", name, ns))
                for name in lab.BATCH_PODS}
    pods = batch()
    if any(x is not None and not x["spec"].get("nodeName") for x in pods.values()):
        wait_for(lambda: all(x is None or x["spec"].get("nodeName") for x in batch().values()), timeout=BRIEF,
                 interval=0.1)
        pods = batch()

    def binders() -> dict[str, list]:
        """Who bound each Pod since it was last created (a Pod made with spec.nodeName: nobody)."""
        from labkit.apiserver.audit import received_at
        events = [e for e in target.audit(since=ctx.ready_time) or []
                  if e.get("verb") == "create" and (e.get("objectRef") or {}).get("namespace") == ns
                  and (e.get("objectRef") or {}).get("name") in pods
                  and (e.get("responseStatus") or {}).get("code", 500) < 300]
        created: dict[str, float] = {}
        for e in events:
            ref = e["objectRef"]
            if ref.get("resource") == "pods" and not ref.get("subresource"):
                created[ref["name"]] = max(created.get(ref["name"], 0.0), received_at(e))
        found: dict[str, list] = {}
        for e in events:
            ref = e["objectRef"]
            if _is_binding(ref) and received_at(e) >= created.get(ref["name"], 0.0):
                who = (e.get("user") or {}).get("username", "")
                if who not in found.setdefault(ref["name"], []):
                    found[ref["name"]].append(who)
        return found
    bound_by = binders()
    if any(x is not None and x["spec"].get("nodeName") and n not in bound_by for n, x in pods.items()):
        # a binding's audit line is written once its response has been sent: it may come a moment
        # after the bound Pod was read
        wait_for(lambda: all(x is None or not x["spec"].get("nodeName") or n in binders() for n, x in pods.items()),
                 timeout=BRIEF, interval=0.1)
        bound_by = binders()
    cm = client.get_or_none("v1", "configmaps", lab.CONFIG_MAP["metadata"]["name"], "kube-system")
    return {"nodes": {name: _node_view(client.get_or_none("v1", "nodes", name)) for name in lab.PACK_NODES},
            "config": None if cm is None else (cm.get("data") or {}).get("config.yaml"),
            "pods": pods, "bound_by": bound_by}


def _profile_signature(profile) -> dict:
    """What tells two profiles apart in scheduling: the plugins at each extension point, the
    Score weights, and the scoring arguments of NodeResourcesFit and BalancedAllocation."""
    points = ("pre_filter", "filter", "post_filter", "pre_score", "score")
    scorers = [p.name for p in profile.at("score")]
    args = {p.name: (getattr(p, "strategy", None), getattr(p, "resources", None), getattr(p, "shape", None))
            for p in profile.plugins if p.name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation")}
    return {"points": {pt: [p.name for p in profile.at(pt)] for pt in points},
            "weights": {n: profile.weights.get(n, 1) for n in scorers}, "args": args,
            "percentage": profile.percentage_of_nodes_to_score}


def binpack_outcomes(lab, profile, pods: list[dict]) -> set[tuple[int, ...]]:
    """Every way labkit's reconstruction of `profile` can place the batch's Pods, one after
    another in the order of their names, on the pool as the lab registers it: the numbers of Pods
    per node used (largest first), one tuple per outcome; a Pod no node fits is left out. Where
    feasible nodes tie for the highest total score, kube-scheduler takes one of them at random
    (pkg/scheduler/schedule_one.go selectHost: reservoir sampling among the highest-scored
    nodes), so each tied node is followed as a branch of its own."""
    from labkit.scheduler.objects import Node, NodeInfo
    order = sorted(pods, key=lambda x: x["metadata"]["name"])
    outcomes: set[tuple[int, ...]] = set()
    seen: set[tuple] = set()

    def place(i: int, placed: tuple[str | None, ...]) -> None:
        if (i, placed) in seen:
            return
        seen.add((i, placed))
        if i == len(order):
            outcomes.add(tuple(sorted(collections_count(n for n in placed if n), reverse=True)))
            return
        nodes = [NodeInfo(Node(n)) for n in lab.PACK_NODES.values()]
        by_name = {n.name: n for n in nodes}
        for view, node in zip(order, placed):
            if node is not None:
                by_name[node].add(Pod(_unbound(view, node)))
        cycle = fw.schedule(profile, nodes, Pod(_unbound(order[i], None)), rng=random.Random(0))
        if not cycle.feasible:
            place(i + 1, placed + (None,))
            return
        if len(cycle.feasible) == 1:            # one feasible node: taken without its score
            place(i + 1, placed + (cycle.feasible[0],))
            return
        best = max(cycle.totals[n] for n in cycle.feasible)
        for name in cycle.feasible:
            if cycle.totals[name] == best:
                place(i + 1, placed + (name,))

    place(0, ())
    return outcomes


def _unbound(view: dict, node: str | None) -> dict:
    pod = copy.deepcopy(view)
    pod["spec"].pop("nodeName", None)
    if node is not None:
        pod["spec"]["nodeName"] = node
    return pod


def judge_binpack(ctx, obs):
    from labkit.scheduler import config as schedconfig
    p = ctx.params
    lab = _lab(ctx)
    ns, packer = p["namespace"], p["profile"]
    reset = f"`labkit reset scheduler {ctx.exercise.id}` to start over"
    changed = _changed_nodes(lab, obs["nodes"], lab.PACK_NODES)
    if changed:
        return ctx.failed(f"the Node(s) {', '.join(changed)} changed: the batch is to be packed by the scheduler's "
                          f"scores on the pool as it is ({reset})", expected="the pool's Nodes as the lab registered them",
                          observed=changed, observed_in=LIVE)
    if obs["config"] is None:
        raise CheckFailed(f"the ConfigMap kube-system/kube-scheduler-config (key config.yaml) is gone: {reset}")
    try:
        profiles = {prof.name: prof for prof in schedconfig.load(obs["config"])[0]}
    except schedconfig.ConfigError as exc:
        return ctx.failed(f"kube-scheduler would not start with the configuration in kube-system/kube-scheduler-config: "
                          f"{exc} (labkit's scheduler keeps the profiles it had; `kubectl get events -n kube-system` "
                          "shows the same)", expected="a configuration kube-scheduler starts with",
                          observed=str(exc), observed_in=LIVE)
    if fw.DEFAULT_SCHEDULER not in profiles or \
            _profile_signature(profiles[fw.DEFAULT_SCHEDULER]) != _profile_signature(make_profile("default")):
        what = "is gone" if fw.DEFAULT_SCHEDULER not in profiles else "no longer schedules as the default profile"
        return ctx.failed(f"the profile {fw.DEFAULT_SCHEDULER} {what}: it decides for every other Pod of the lab; "
                          f"leave it as it was and change the profile {packer}", expected="the default profile",
                          observed=what, observed_in=LIVE)
    if packer not in profiles:
        return ctx.failed(f"the configuration has no profile {packer} any more: the batch is to be scheduled by it",
                          expected=f"a profile {packer}", observed=sorted(profiles), observed_in=LIVE)
    pods = obs["pods"]
    missing = [n for n, x in pods.items() if x is None]
    if missing:
        raise CheckFailed(f"the Pod(s) {', '.join(missing)} of the batch do not exist in {ns}: create the batch from "
                          "batch.yaml in the lab's directory")
    for name, view in pods.items():
        built = _sched_view({**lab.batch_pod(int(name.split("-")[1])), "metadata": {"name": name, "namespace": ns}})
        for key in ("nodeSelector", "containers"):
            if view["spec"].get(key) != built["spec"].get(key):
                what = "requests" if key == "containers" else key
                return ctx.failed(f"the {what} of {name} are not batch.yaml's: the batch is to be packed as it "
                                  "is, by the scheduler's scores", expected=f"the {what} of batch.yaml",
                                  observed=view["spec"].get(key), observed_in=LIVE)
        if own_tolerations(view["spec"].get("tolerations")) != built["spec"]["tolerations"]:
            return ctx.failed(f"the tolerations of {name} are not batch.yaml's", expected="batch.yaml's tolerations",
                              observed=view["spec"].get("tolerations"), observed_in=LIVE)
    names = {n: x["spec"].get("schedulerName") or fw.DEFAULT_SCHEDULER for n, x in pods.items()}
    other = sorted({s for s in names.values() if s != packer})
    if other:
        lost = [s for s in other if s not in profiles]
        return ctx.failed(f"{sum(1 for s in names.values() if s != packer)} Pod(s) of the batch name the scheduler "
                          f"{', '.join(other)} in spec.schedulerName"
                          + (", which no profile has: no scheduler ever takes them" if lost else "")
                          + f". The batch is to be scheduled by the profile {packer} (spec.schedulerName cannot be "
                          "changed on an existing Pod: make them again)", expected=packer, observed=other,
                          observed_in=LIVE)
    unbound = [n for n, x in pods.items() if not x["spec"].get("nodeName")]
    if unbound:
        return ctx.error(f"{', '.join(unbound)} are not bound yet: the scheduler tries them again after its backoff "
                         "(at most 10 s); check again in a few seconds")
    pinned = sorted(n for n in pods if not obs["bound_by"].get(n))
    if pinned:
        return ctx.failed(f"{', '.join(pinned)} were given their node by hand (spec.nodeName set when they were "
                          f"created): no scheduler placed them. The scheduler's profile {packer} is to place the "
                          f"batch: create it without nodes ({reset})", expected="bound by the scheduler",
                          observed=pinned, observed_in=LIVE)
    by_hand = sorted({n for n, users in obs["bound_by"].items() for u in users if u != SCHEDULER_USER})
    if by_hand:
        return ctx.failed(f"{', '.join(by_hand)} were bound by a binding sent by hand: the scheduler's profile "
                          f"{packer} is to place the batch ({reset})", expected="bound by the scheduler",
                          observed=by_hand, observed_in=LIVE)
    placed = {n: x["spec"]["nodeName"] for n, x in pods.items()}
    profile = profiles[packer]
    outcomes = binpack_outcomes(lab, profile, list(pods.values()))
    counts = tuple(sorted(collections_count(placed.values()), reverse=True))
    used = len(counts)
    from labkit.scheduler.objects import CPU, Node
    cpu = sum(Pod(x).requests().get(CPU, 0) for x in pods.values())
    per_node = Node(lab.PACK_NODES["pack-1"]).allocatable[CPU]
    fewest = -(-cpu // per_node)            # the pool's nodes are alike; CPU is what runs out first
    if counts not in outcomes:
        return ctx.failed(f"the batch is spread as {list(counts)} Pods per node, which the profile {packer} as the "
                          "configuration has it now cannot give (labkit's reconstruction, the Pods one after another in "
                          "name order, whichever node it picks where nodes tie): did the configuration change after they "
                          f"were scheduled? Make them again ({reset})",
                          expected="a placement the profile decides", observed=placed, observed_in=LIVE)
    most = max(len(o) for o in outcomes)
    if len(outcomes) > 1 and most > fewest:
        # with equal totals selectHost picks at random among the highest-scored feasible nodes
        # (pkg/scheduler/schedule_one.go): the profile's scores do not decide where the batch goes
        alike = ("runs no Score plugin, so every feasible node scores alike" if not profile.at("score") else
                 "scores some feasible nodes alike")
        return ctx.failed(f"the batch ended as {list(counts)} Pods per node this time, but the profile {packer} {alike}: "
                          "kube-scheduler then picks one of the highest-scored nodes at random, so where the batch ends "
                          f"is chance: the profile can place it on up to {most} nodes ({fewest} would hold it). A profile that packs scores the fullest "
                          f"node that fits highest: look at {packer}'s Score plugins, their weights and arguments "
                          "(plugins.score, pluginConfig)", expected=f"a profile that always places the batch on {fewest} nodes",
                          observed=f"{used} nodes this time; up to {most} by the profile's scores", observed_in=LIVE)
    if most > fewest:
        like_default = _profile_signature(profile) == _profile_signature(make_profile("default"))
        how = ("scores the nodes as the default profile does, which favours the emptiest" if like_default else
               "gives that placement (labkit's reconstruction of it)")
        return ctx.failed(f"the batch uses {used} nodes of the pool: the profile {packer} {how}; {fewest} nodes would "
                          f"hold it. Change how {packer} scores (its Score plugins and their pluginConfig), then make "
                          "the batch again", expected=f"{fewest} nodes", observed=f"{used} nodes", observed_in=LIVE)
    return ctx.passed(f"the profile {packer} packs the batch onto {used} nodes, the fewest that hold it, as labkit's "
                      "reconstruction decides it")


def collections_count(values) -> list[int]:
    """How many times each value occurs, as a list of counts."""
    import collections
    return list(collections.Counter(values).values())


def check_binpack(ctx):
    return judge_binpack(ctx, observe_binpack(ctx))
