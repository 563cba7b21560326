"""The scheduler lab's prediction exercises (score-predict, preempt-predict), for
labkit.predictions: which cases `labkit scheduler explain` and `play` show only once a prediction is
recorded (the exercise's case file, a copy of it with other names, or any case that holds one of
its nodes with the same Pods and the same incoming Pod, other nodes added or left out; for
score-predict also a near-copy: any case with a node scored as one of its nodes is, give or take a
point; for preempt-predict any case with a node whose victims are shaped as on one of its nodes);
spread's outcome (spread_gate); and noexecute's: any case with a Pod that tolerates as one of its
six Pods does under a NoExecute taint of the drain taint's key, or of another key its tolerations
were renamed to (noexecute_gate). Keeping the
prediction when the outcome is first shown, and grading that kept copy, is labkit.predictions'."""

from __future__ import annotations

import functools
import json
from pathlib import Path

LAB = "scheduler"
EXERCISES = ("score-predict", "preempt-predict")     # each has params.case: the case file it is about


def _node_shapes(case: dict) -> set[str]:
    """Each node of the case with the Pods bound to it, whatever their names: the node's allocatable
    resources, labels other than its hostname, taints; each of its Pods' priority, labels,
    containers' requests and tolerations."""
    def pod(p: dict) -> str:
        return json.dumps({"priority": p.get("priority", 0), "labels": p.get("labels") or {},
                           "containers": [c.get("requests") for c in p.get("containers") or []],
                           "tolerations": p.get("tolerations") or []}, sort_keys=True)
    shapes = set()
    for n in case.get("nodes") or []:
        labels = {k: v for k, v in (n.get("labels") or {}).items() if k != "kubernetes.io/hostname"}
        pods = sorted(pod(p) for p in case.get("pods") or [] if p.get("nodeName") == n.get("name"))
        shapes.add(json.dumps({"allocatable": n.get("allocatable"), "labels": labels,
                               "taints": n.get("taints") or [], "pods": pods}, sort_keys=True))
    return shapes


def _incoming(case: dict) -> str:
    """What of the incoming Pod decides its scores and its victims: its requests and priority."""
    incoming = case.get("incoming") or {}
    return json.dumps({"priority": incoming.get("priority", 0),
                       "containers": [c.get("requests") for c in incoming.get("containers") or []]}, sort_keys=True)


NEAR = 1     # score points: a node scored this close to one of the score exercise's shows its scores


def _scored(case: dict) -> list[tuple]:
    """Each node of the case as the default profile scores the incoming Pod there (labkit's
    reconstruction, ties broken with seed 0 as explain does): NodeResourcesFit's and
    NodeResourcesBalancedAllocation's scores (from the node's and the Pods' CPU and memory,
    whatever way the quantities are written or the requests split between Pods), and whether
    the node has a PreferNoSchedule taint the Pod does not tolerate. Nothing for a case labkit
    cannot play."""
    import random

    from labkit.scheduler import framework as fw
    from labkit.scheduler.play import pod_of, snapshot_of
    from labkit.scheduler.profiles import make_profile
    try:
        nodes, _pods = snapshot_of(case)
        cycle = fw.schedule(make_profile("default"), nodes, pod_of(case["incoming"]), rng=random.Random(0))
    except Exception:       # a broken case shows nothing; play and explain say what is wrong with it
        return []
    fit = cycle.scores.get("NodeResourcesFit", {})
    balanced = cycle.scores.get("NodeResourcesBalancedAllocation", {})
    taint = cycle.scores.get("TaintToleration", {})
    return [(fit[n][0], balanced[n][0] if n in balanced else None, bool(taint.get(n, (0,))[0])) for n in fit]


def _near(one: tuple, other: tuple) -> bool:
    if one[2] != other[2] or (one[1] is None) != (other[1] is None):
        return False
    return abs(one[0] - other[0]) <= NEAR and (one[1] is None or abs(one[1] - other[1]) <= NEAR)


def _victim_shapes(case: dict) -> set[str]:
    """Each node of the case on which DefaultPreemption could make room for the incoming Pod
    (labkit's reconstruction, default_preemption.go SelectVictimsOnNode with the case's PDBs), as
    its outcome whatever the names, the way quantities are written or the priorities' values (only
    their order counts): the requests of the Pods it evicts and of those it leaves there, and the
    PDB violations. Not the node's capacity nor the incoming Pod's requests: an incoming Pod that
    asks for more of a resource that does not bind (memory on a node with room), or a node with
    more of it, shows the same victims, and is the same outcome. Nothing for a case labkit cannot
    play."""
    from labkit.scheduler import framework as fw
    from labkit.scheduler.objects import CPU, MEMORY
    from labkit.scheduler.play import pod_of, snapshot_of
    from labkit.scheduler.preemption import select_victims
    from labkit.scheduler.profiles import make_profile
    try:
        nodes, _pods = snapshot_of(case)
        incoming = pod_of(case["incoming"])
        cycle = fw.Cycle(incoming, make_profile("default"), nodes, list(case.get("pdbs") or []))
        shapes = set()

        def shape(pod) -> list[int]:
            asked = pod.requests()
            return [asked.get(CPU, 0), asked.get(MEMORY, 0)]
        for node in nodes:
            victims, violations, _st = select_victims(cycle, incoming, node)
            if not victims:
                continue
            kept = [p for p in node.pods if all(p is not v for v in victims)]
            shapes.add(json.dumps({"victims": sorted(shape(v) for v in victims),
                                   "kept": sorted(shape(p) for p in kept), "violations": violations}))
        return shapes
    except Exception:       # a broken case shows nothing; play and explain say what is wrong with it
        return set()


def reveals(case: dict, exercise_case: dict, exercise: str = "") -> bool:
    """Whether playing `case` shows part of the exercise case's outcome: the same incoming Pod
    (requests, priority) and at least one of the exercise's nodes with the same Pods on it, whatever
    the names, other nodes added or some left out (each node's NodeResourcesFit score, and the
    victims preemption would pick there, depend on that node, its Pods and the incoming Pod alone).
    For score-predict, also any case with a node the default profile scores for its incoming Pod
    within NEAR points of one of the exercise's (NodeResourcesFit and BalancedAllocation, with the
    same PreferNoSchedule verdict): a hand-edited near-copy (quantities written otherwise, a Pod
    split in two, a few MiB more) shows the same scores. For preempt-predict, also any case with a
    node where preemption would evict Pods of the same requests as on one of the exercise's nodes,
    and leave the same ones (_victim_shapes): a near-copy with the quantities written otherwise,
    the priorities renumbered in the same order, or the incoming Pod or the nodes given more or
    less of what does not decide the victims, shows the same victims."""
    if _incoming(case) == _incoming(exercise_case) and bool(_node_shapes(case) & _node_shapes(exercise_case)):
        return True
    if exercise == "preempt-predict":
        return bool(_victim_shapes(case) & _victim_shapes(exercise_case))
    if exercise != "score-predict":
        return False
    theirs = _scored(exercise_case)
    return any(_near(mine, one) for mine in _scored(case) for one in theirs)


def exercise_of(case: dict) -> tuple[str, Path] | None:
    """The prediction exercise whose case this is, or shows a part of (`reveals`), with the case
    file, or None."""
    from labkit.inputs import load_yaml
    from labkit.labs import discover, load_lab
    directory = discover().get(LAB)
    if directory is None:
        return None
    lab = load_lab(directory)
    for exercise in EXERCISES:
        path = lab.directory / lab.exercise(exercise).params["case"]
        try:
            if reveals(case, load_yaml(path), exercise):
                return exercise, path
        except Exception:       # a file broken by hand is no longer the exercise's case
            continue
    return None


def _whole_number(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def prediction_problem(exercise: str, text: str) -> str | None:
    """What keeps an answer text from being a whole prediction of `exercise` (score-predict,
    preempt-predict, noexecute, spread) that its check can read, or None when it is one: not
    YAML, a key given twice, a key missing or one the exercise does not read (lab.yaml
    `answer_keys`), or a part of the wrong form whatever the outcome (a node or Pod the case does
    not have, a score that is no whole number from 0 to 100, a time that is neither a number of
    seconds nor never; for spread, a zone or node that is not the pool's or one of them missing,
    a count that is no whole number, a node without a reason), as the checks refuse them. A tool keeps the answer as it is when it first
    shows the outcome (labkit.predictions): kept half-written or misspelt, it could only fail, and
    the outcome could be copied into a fresh answer only by forgetting the kept one. Says what is
    missing or malformed, never what is right (as labkit.resources.situations.prediction_problem)."""
    from labkit.inputs import load_yaml
    from labkit.labs import discover, load_lab
    from labkit.predictions import mapping_problem

    data, problem = mapping_problem(text)
    if problem:
        return problem
    directory = discover().get(LAB)
    if directory is None:
        return None
    lab = load_lab(directory)
    wanted = list(lab.exercise(exercise).answer_keys or [])
    given = [str(k) for k in data]
    for key in wanted:
        if key not in given:
            return f"it has no key {key}"
    for key in given:
        if key not in wanted:
            return f"it has the key {key}, which this exercise does not read"
    if exercise == NOEXECUTE:
        for key in wanted:
            value = data[key]
            if str(value).strip().lower() != "never" and (_whole_number(value) is None or _whole_number(value) < 0):
                return f"{key} is neither 0, a number of seconds, nor never"
        return None
    if exercise == SPREAD:
        for key in ("zones", "nodes"):
            if not isinstance(data[key], dict):
                return f"{key} is not a mapping"
        # the check reads each zone and each node of the pool once (checks.py check_spread)
        env = lab.environment_module()
        pool = {"zones": sorted({n["metadata"]["labels"][env.ZONE_KEY] for n in env.ZONE_NODES.values()}),
                "nodes": list(env.ZONE_NODES)}
        for key, what in (("zones", "zone of the pool"), ("nodes", "node of the pool")):
            given = [str(k) for k in data[key]]
            unknown = [k for k in given if k not in pool[key]]
            if unknown:
                return f"{key}: {unknown[0]!r} is not a {what}"
            missing = [k for k in pool[key] if k not in given]
            if missing:
                return f"{key}: {missing[0]} is missing"
        if any(_whole_number(v) is None or _whole_number(v) < 0 for v in data["zones"].values()):
            return "a count of zones is not a whole number"
        for name, reason in data["nodes"].items():
            if reason is None or not str(reason).strip():
                return f"nodes: {name} has no reason"
        return None
    case = load_yaml(lab.directory / lab.exercise(exercise).params["case"])
    nodes = [n["name"] for n in case.get("nodes") or []]
    node = data["node"]
    if not isinstance(node, str) or node.strip() not in nodes:
        return f"node: {node!r} is not a node of the case"
    if exercise == "score-predict":
        fit = data["fit"]
        if not isinstance(fit, dict):
            return "fit is not a mapping of each node to its score"
        for name in fit:
            if str(name) not in nodes:
                return f"fit: {name!r} is not a node of the case"
        for name in nodes:
            if name not in fit:
                return f"fit: {name} has no score"
            score = _whole_number(fit[name])
            if score is None or not 0 <= score <= 100:
                return f"fit: the score of {name} is not a whole number from 0 to 100"
        return None
    victims = data["victims"]
    pods = {p["name"] for p in case.get("pods") or []}
    if not isinstance(victims, list):
        return "victims is not a list of Pod names"
    for victim in victims:
        if str(victim).strip() not in pods:
            return f"victims: {victim!r} is not a Pod of the case as it names them"
    return None


def _not_whole(exercise: str) -> str:
    """What a refusal adds when the answer file is there but no whole prediction yet."""
    from labkit import predictions
    from labkit.exercises import answer_path
    text = predictions.answer_text(LAB, exercise)
    problem = None if text is None else prediction_problem(exercise, text)
    return "" if problem is None else f" (your {answer_path(LAB, exercise)} is not a whole prediction yet: {problem})"


def _whole(exercise: str):
    return lambda text: prediction_problem(exercise, text) is None


def gate(case: dict, path: Path, tool: str = "labkit scheduler explain") -> str | None:
    """None when `case` may be played and shown; else what to say instead. Showing the case of a
    prediction exercise with a whole prediction written (prediction_problem) keeps that prediction
    (the first time)."""
    from labkit import predictions
    found = exercise_of(case)
    if found is None:
        return None
    exercise, _case_path = found
    if predictions.reveal(LAB, exercise, tool, situation=str(path), complete=_whole(exercise)):
        return None
    return (f"{path} is, or holds part of, the case of exercise {exercise}, whose outcome you are to predict "
            f"(`labkit show {LAB} {exercise}`): " + predictions.how_to_record(LAB, exercise) + _not_whole(exercise))


# spread asks, for shop's Pending replica, how many of shop's Pods each zone holds and each pool
# node's Filter reason: a decision with that outcome (explain.spread_outcome: per domain, the count
# and the nodes' reasons, without names) is withheld until spread's answer is written, whatever the
# Pod, the nodes or their names (the Pending replica, a copy of shop, a case built like the pool)
SPREAD = "spread"
# the constraint spread's prompt describes: over the zone label, maxSkew 1, DoNotSchedule, counting
# shop's Pods only (every constraint the check accepts places the replicas alike)
SPREAD_CONSTRAINT = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"app": "shop"}}}


@functools.cache
def spread_exercise_outcome() -> list | None:
    """spread's outcome by labkit's reconstruction: the six replicas of shop with the constraint
    the prompt describes, scheduled one after another by the default profile on the pool as the lab
    builds it (cart on its node), ties broken with seed 0; explain.spread_outcome of the first that
    fits nowhere. Worked out once a process: it depends on the lab's files alone."""
    import copy
    import random

    from labkit.labs import discover, load_lab
    from labkit.scheduler import framework as fw
    from labkit.scheduler.explain import spread_outcome
    from labkit.scheduler.objects import Node, NodeInfo, Pod
    from labkit.scheduler.profiles import make_profile

    directory = discover().get(LAB)
    if directory is None:
        return None
    lab = load_lab(directory).environment_module()
    nodes = [NodeInfo(Node(copy.deepcopy(n))) for n in lab.ZONE_NODES.values()]
    by_name = {n.name: n for n in nodes}
    cart = copy.deepcopy(lab.CART)
    cart["metadata"]["namespace"] = lab.NAMESPACE
    by_name[cart["spec"]["nodeSelector"]["kubernetes.io/hostname"]].add(Pod(cart))
    rng = random.Random(0)
    for i in range(lab.SHOP_REPLICAS):
        template = copy.deepcopy(lab.SHOP["spec"]["template"])
        obj = {"metadata": {"name": f"shop-{i}", "namespace": lab.NAMESPACE, "uid": f"shop-{i}",
                            "labels": template["metadata"]["labels"]},
               "spec": {**template["spec"], "topologySpreadConstraints": [copy.deepcopy(SPREAD_CONSTRAINT)]}}
        cycle = fw.schedule(make_profile("default"), nodes, Pod(obj), rng=rng)
        if cycle.chosen is None:
            return spread_outcome(cycle)
        obj["spec"]["nodeName"] = cycle.chosen
        by_name[cycle.chosen].add(Pod(obj))
    return None


def spread_gate(outcome: list | None, situation: str, tool: str = "labkit scheduler explain") -> str | None:
    """None when a decision of this spread outcome (explain.spread_outcome) may be shown; else what
    to say instead: it is spread's outcome and no answer to spread is written yet. Shown once one
    is, which keeps that answer as it is then: spread's check grades that kept copy."""
    from labkit import predictions
    if outcome is None or outcome != spread_exercise_outcome():
        return None
    if predictions.reveal(LAB, SPREAD, tool, situation=situation, complete=_whole(SPREAD)):
        return None
    return (f"{situation}: its zones and each node's Filter reason are what exercise {SPREAD} asks you to work out "
            f"(`labkit show {LAB} {SPREAD}`): "
            + (predictions.how_to_record(LAB, SPREAD) + _not_whole(SPREAD)).replace("prediction", "answer"))


# noexecute asks after how many seconds the taint-eviction controller deletes each of six Pods of
# node-e once the drain taint is added. What shows part of that outcome, whatever the names: the
# verdict on a Pod that behaves as one of the six under a NoExecute taint of the drain taint's key
# (any value), or of another key its tolerations were renamed to (tolerates_as_drain_pod_under) —
# in `play`'s taint-eviction cases (each bound Pod's eviction time), as the incoming Pod of a
# scheduling case or a live decision (TaintToleration's Filter verdict on a node with such
# a taint: tolerated or not), or in the lab's cluster (the taint-eviction controller's decisions,
# lab.noexecute_trial). A Pod "behaves as" one of the six when the controller gives it the same
# delay under every NoExecute taint of that key and each value the six's tolerations name, the
# drain taint's own, and one none names (toleration.go ToleratesTaint decides by key, value and
# effect alone): a copy with other names, or tolerations written otherwise to the same effect.
NOEXECUTE = "noexecute"
EVICTION_CASE = "taint-eviction-controller"         # play's config of a taint-eviction case


def _drain_situation() -> tuple[dict, list[list[dict]]] | None:
    """(the drain taint, each of the six Pods' tolerations) as the lab builds them; None without the lab."""
    from labkit.labs import discover
    directory = discover().get(LAB)
    if directory is None:
        return None
    taint, six = _drain_of(str(directory))
    return dict(taint), [list(t) for t in six]


@functools.lru_cache(maxsize=4)
def _drain_of(directory: str) -> tuple[dict, list]:
    from labkit.labs import load_lab
    module = load_lab(Path(directory))._load("lab.py")
    return dict(module.DRAIN_TAINT), [list(t) for t in module.DRAIN_PODS.values()]


def _behaviour(tolerations: list, probes: list[dict]) -> tuple:
    from labkit.scheduler import tainteviction
    from labkit.scheduler.objects import Pod
    pod = Pod({"metadata": {"name": "probe"}, "spec": {"tolerations": list(tolerations or [])}})
    return tuple(tainteviction.eviction_delay(pod, [probe]) for probe in probes)


def _probes(taint: dict, six: list[list[dict]]) -> list[dict]:
    values = {taint.get("value") or "", "labkit-another-value"} | {
        t.get("value") or "" for tolerations in six for t in tolerations if t.get("key") == taint["key"]}
    return [{"key": taint["key"], "value": v, "effect": "NoExecute"} for v in sorted(values)]


def behaves_as_drain_pod(tolerations: list | None) -> bool:
    """Whether a Pod with these tolerations behaves as one of noexecute's six under the drain
    taint's key (see above)."""
    found = _drain_situation()
    if found is None:
        return False
    taint, six = found
    probes = _probes(taint, six)
    try:
        return _behaviour(tolerations or [], probes) in {_behaviour(t, probes) for t in six}
    except (TypeError, ValueError, AttributeError):     # tolerations broken by hand show nothing
        return False


def _as_drain(tolerations: list, taint: dict, drain: dict) -> list:
    """`tolerations` read with `taint` standing for the drain taint: its key swapped with the drain
    taint's, and, in the tolerations of that key, its value with the drain taint's (a copy of the
    six Pods under a taint of other names, their tolerations renamed with it)."""
    def swap(x, a, b):
        return b if x == a else a if x == b else x
    key, value = taint.get("key"), taint.get("value") or ""
    out = []
    for t in tolerations:
        if isinstance(t, dict) and t.get("key") and t.get("key") in (key, drain["key"]):
            t = dict(t, key=swap(t["key"], key, drain["key"]))
            if t["key"] == drain["key"] and t.get("value"):
                t["value"] = swap(t["value"], value, drain.get("value") or "")
        out.append(t)
    return out


def tolerates_as_drain_pod_under(taints: list | None, tolerations: list | None) -> bool:
    """Whether a Pod with `tolerations` next to `taints` shows part of noexecute's outcome: under
    a NoExecute taint of the drain key, when it behaves as one of the six; under one of another
    key, when it has a toleration of that key (or of every key) and behaves as one of the six once
    that taint's key and value are renamed to the drain taint's in its tolerations: a copy of the
    six under a taint renamed, which the controller treats as it treats them (toleration.go
    ToleratesTaint compares key, value and effect as strings)."""
    found = _drain_situation()
    if found is None:
        return False
    drain = found[0]
    tolerations = [t for t in tolerations or []]
    for taint in taints or []:
        if not isinstance(taint, dict) or taint.get("effect") != "NoExecute":
            continue
        if taint.get("key") == drain["key"]:
            if behaves_as_drain_pod(tolerations) or behaves_as_drain_pod(_as_drain(tolerations, taint, drain)):
                return True
            continue
        if any(isinstance(t, dict) and (t.get("key") or "") in ("", taint.get("key")) for t in tolerations) \
                and behaves_as_drain_pod(_as_drain(tolerations, taint, drain)):
            return True
    return False


def noexecute_reveals(case: dict) -> bool:
    """Whether playing or explaining `case` shows part of noexecute's outcome: in a taint-eviction
    case, a Pod bound to a node with a NoExecute taint that tolerates as one of the six under it
    (tolerates_as_drain_pod_under: the drain key, or another key its tolerations were renamed
    to); in a scheduling case, an incoming Pod that does so next to a node's taints (its Filter
    verdict there)."""
    if not isinstance(case, dict):
        return False
    nodes = [n for n in case.get("nodes") or [] if isinstance(n, dict)]
    if case.get("config") == EVICTION_CASE:
        taints = {n.get("name"): n.get("taints") for n in nodes}
        return any(isinstance(p, dict) and p.get("nodeName") in taints
                   and tolerates_as_drain_pod_under(taints[p.get("nodeName")], p.get("tolerations"))
                   for p in case.get("pods") or [])
    incoming = case.get("incoming")
    return isinstance(incoming, dict) and any(tolerates_as_drain_pod_under(n.get("taints"), incoming.get("tolerations"))
                                              for n in nodes)


def noexecute_gate(case: dict, situation: str, tool: str) -> str | None:
    """None when `case` may be played and shown; else what to say instead: it shows part of
    noexecute's outcome and no prediction is written yet. Shown once one is, which keeps that
    prediction as it is then: noexecute's check grades that kept copy."""
    from labkit import predictions
    if not noexecute_reveals(case):
        return None
    if predictions.reveal(LAB, NOEXECUTE, tool, situation=situation, complete=_whole(NOEXECUTE)):
        return None
    what = (f"{situation} tolerates" if situation.startswith("Pod ") else f"{situation} holds a Pod that tolerates")
    return (f"{what} as one of noexecute's Pods does, next to a NoExecute taint of the drain taint's key (or of a key its tolerations were renamed to): what happens "
            f"to it is what exercise {NOEXECUTE} asks you to predict (`labkit show {LAB} {NOEXECUTE}`): "
            + predictions.how_to_record(LAB, NOEXECUTE) + _not_whole(NOEXECUTE))
