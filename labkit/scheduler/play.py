"""Play one scheduler case (the fidelity format: nodes, Pods already bound, PodDisruptionBudgets,
the incoming Pod, a profile, taint updates) on labkit's reconstruction, and compare the outcome
with the case's `expect`: the node, per-node Filter reasons, scores, the FailedScheduling text,
preemption victims, eviction times, backoff."""

from __future__ import annotations

import random
from pathlib import Path

from labkit.cases import Played
from labkit.errors import ConfigError
from labkit.inputs import load_yaml
from labkit.scheduler import framework as fw
from labkit.scheduler import queue, tainteviction
from labkit.scheduler.objects import Node, NodeInfo, Pod
from labkit.scheduler.preemption import DefaultPreemption
from labkit.scheduler.profiles import make_profile

POD_SCHEDULED_FALSE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
FAILED_SCHEDULING = {"type": "Warning", "reason": "FailedScheduling"}


def load_case(path: Path) -> dict:
    case = load_yaml(path)
    if not isinstance(case, dict) or "expect" not in case:
        raise ConfigError(path, None, "expected a scheduler case: a mapping with id, ... and expect")
    return case


def pod_of(spec: dict, uid_prefix: str = "uid-") -> Pod:
    obj = dict(spec)
    obj.setdefault("namespace", "default")
    obj.setdefault("uid", f"{uid_prefix}{obj.get('name')}")
    return Pod(obj)


def snapshot_of(case: dict) -> tuple[list[NodeInfo], list[Pod]]:
    nodes = [NodeInfo(Node(n)) for n in case.get("nodes") or []]
    by_name = {n.name: n for n in nodes}
    pods = []
    for i, spec in enumerate(case.get("pods") or []):
        pod = pod_of({"startTime": i, **spec})
        pods.append(pod)
        if pod.node_name in by_name:
            by_name[pod.node_name].add(pod)
    return nodes, pods


def _reasons(cycle: fw.Cycle, node: str):
    if node in cycle.feasible:
        return "ok"
    st = cycle.statuses.get(node)
    if st is None:
        return None
    return st.reasons[0] if len(st.reasons) == 1 else list(st.reasons)


def _uids(text: str, pods: list[Pod]) -> str:
    for pod in pods:
        text = text.replace(f"<uid of {pod.name}>", pod.uid)
    return text


def play(case: dict, seed: int = 0) -> Played:
    played = Played(str(case.get("id")), str(case.get("title") or ""))
    expect = case.get("expect") or {}
    config = case.get("config")
    if "fiterror" in case:
        return _play_fiterror(case, played)
    if "table" in case and "attempts_to_backoff_seconds" in (case.get("table") or {}):
        table = {int(k): v for k, v in case["table"]["attempts_to_backoff_seconds"].items()}
        got = {k: queue.backoff_seconds(k) for k in table}
        played.outcome["table"] = got
        played.check("table", table, got)
        return played
    nodes, pods = snapshot_of(case)
    if config == "taint-eviction-controller":
        return _play_taint_eviction(case, nodes, played)
    profile = make_profile(config)
    incoming = pod_of(case["incoming"])
    rng = random.Random(seed)
    cycle = fw.schedule(profile, nodes, incoming, pdbs=case.get("pdbs"), rng=rng)
    outcome: dict = {"node": cycle.chosen,
                     "filter": {n.name: _reasons(cycle, n.name) for n in nodes},
                     "scores": {p: {n: v[1] for n, v in values.items()} for p, values in cycle.scores.items()},
                     "raw_scores": {p: {n: v[0] for n, v in values.items()} for p, values in cycle.scores.items()},
                     "totals": dict(cycle.totals)}
    if cycle.chosen is None:
        outcome["unschedulable"] = {"message": cycle.fit_error, "condition": POD_SCHEDULED_FALSE,
                                    "event": {**FAILED_SCHEDULING, "message": cycle.fit_error}}
        outcome["victims"] = [v.name for v in cycle.victims]
        outcome["nominatedNodeName"] = cycle.nominated_node
    played.outcome = outcome
    with_dra = profile.has("DynamicResources")
    for key, want in expect.items():
        if key == "node":
            played.check("node", want, cycle.chosen)
        elif key == "filter":
            for node, reason in want.items():
                played.check(f"filter {node}", reason, outcome["filter"].get(node))
        elif key == "filter_code":
            for node, code in want.items():
                st = cycle.statuses.get(node)
                played.check(f"filter code {node}", code, st.code if st else "Success")
        elif key == "scores":
            scope = want.get("scope", "total")
            if scope == "total":
                got = cycle.totals
            else:           # one plugin's scores on every node, as its unit tests take them (no Filter first)
                scored = fw.Cycle(incoming, profile, nodes, list(case.get("pdbs") or []))
                scored.feasible = [n.name for n in nodes]
                fw.run_pre_filters(scored, incoming)
                fw.prioritize(scored, incoming)
                got = {n: v[1] for n, v in scored.scores.get(scope.split(":", 1)[1], {}).items()}
            for node, value in (want.get("values") or {}).items():
                played.check(f"score {scope} {node}", value, got.get(node))
        elif key == "unschedulable":
            message = want.get("message") if with_dra else want.get("message_without_dra", want.get("message"))
            played.check("unschedulable message", message, cycle.fit_error)
            if "condition" in want:
                played.check("unschedulable condition", want["condition"],
                             POD_SCHEDULED_FALSE if cycle.chosen is None else None)
            if "event" in want:
                got_event = {k: v for k, v in FAILED_SCHEDULING.items() if k in want["event"]} if cycle.chosen is None else None
                played.check("unschedulable event", want["event"], got_event)
        elif key == "victims":
            played.check("victims", sorted(want), sorted(v.name for v in cycle.victims))
        elif key == "nominatedNodeName":
            played.check("nominatedNodeName", want, cycle.nominated_node)
        elif key == "victim_condition":
            played.check("victim condition", want,
                         DefaultPreemption.victim_condition(profile.name) if cycle.victims else None)
        elif key == "victim_event":
            got = DefaultPreemption.victim_event(incoming, cycle.nominated_node) if cycle.victims else None
            played.check("victim event", {**want, "message": _uids(want.get("message", ""), [incoming])}, got)
        elif key == "then":
            after = [NodeInfo(n.node, [p for p in n.pods if all(p is not v for v in cycle.victims)]) for n in nodes]
            incoming.obj.setdefault("status", {})["nominatedNodeName"] = cycle.nominated_node
            second = fw.schedule(profile, after, incoming, pdbs=case.get("pdbs"), rng=rng)
            outcome["then"] = {"node": second.chosen, "message": second.fit_error}
            if "node" in want:
                played.check("then node", want["node"], second.chosen)
        else:
            played.check(key, want, "(labkit does not play this expectation)")
    return played


def _play_fiterror(case: dict, played: Played) -> Played:
    spec = case["fiterror"]
    statuses = {name: fw.Status(s.get("code", fw.UNSCHEDULABLE), list(s.get("reasons") or []))
                for name, s in (spec.get("nodeStatuses") or {}).items()}
    absent = spec.get("absentNodesStatus")
    absent_status = fw.Status(absent.get("code", fw.UNRESOLVABLE), list(absent.get("reasons") or [])) if absent else None
    message = fw.fit_error_message(int(spec.get("numAllNodes") or len(statuses)), statuses, absent_status,
                                   spec.get("preFilterMsg") or "", spec.get("postFilterMsg") or "")
    played.outcome["message"] = message
    played.check("message", case["expect"].get("message"), message)
    return played


def _play_taint_eviction(case: dict, nodes: list[NodeInfo], played: Played) -> Played:
    expect = case.get("expect") or {}
    delays, events = {}, []
    for node in nodes:
        for pod in node.pods:
            delay = tainteviction.eviction_delay(pod, node.node.taints)
            delays[pod.name] = delay
            if delay is not None:
                events.append(tainteviction.mark_event(pod))
    played.outcome = {"evicted_after_seconds": delays, "events": events}
    for key, want in expect.items():
        if key == "evicted_after_seconds":
            for pod, seconds in want.items():
                played.check(f"evicted after {pod}", seconds, delays.get(pod, "(no such pod)"))
        elif key == "evicted_pod_condition":
            played.check("evicted pod condition", want,
                         tainteviction.CONDITION if any(d is not None for d in delays.values()) else None)
        elif key == "event":
            played.check("event", want, want if want in events else events)
        else:
            played.check(key, want, "(labkit does not play this expectation)")
    return played
