"""Checks of the resources lab.

Truth comes from labkit's reconstruction of kubelet (labkit.resources: QoS, oom_score_adj, CFS
quota, cpu.shares/cpu.weight, the eviction ranking) applied to the lab's pristine scenario files,
or from the live kernel: cgroup files and counters. Throttling is judged from the CFS quota
kubelet derives from the spec, the one the kernel enforces, and the kernel's throttling counter
over ten periods (the one reading that waits), OOM from
the memory each workload needs (its command) against its limit and from the kernel's kill
counters, eviction from kubelet's ranking.

Exercises that change live state are checked as `judge_<name>(ctx, observe_<name>(ctx))`: the
observation is what the node holds (each Pod's stored spec, status, and per container whether
it runs, its cgroup's quota, memory limit, working set and OOM kills), the judge is a pure
verdict on it. The judge checks the whole statement of lab.yaml's `solved:`: what must hold,
derived from the observed specs through labkit's reconstruction and confirmed on the live
counters, and what must stay as the scenario gave it (the workloads' commands, the other Pods,
every field the exercise does not ask to change).

Prediction exercises (qos, eviction-order, weight) are graded against the Pods as the lab ships
them, on the answer as it was when a labkit tool first showed the outcome
(labkit.predictions), and say so when the student changed the Pods.
"""

from __future__ import annotations

import copy
import functools
import math
import re
from pathlib import Path

from labkit.exercises import LIVE, AnswerMalformed, AnswerMissing, CheckFailed, settle
from labkit.quantity import Quantity
from labkit.pods import BEST_EFFORT, BURSTABLE, GUARANTEED, load_pods, pod_from_dict, pod_request, qos_class
from labkit import predictions
from labkit.resources import eviction, kubelet
from labkit.resources.nearmiss import without_resources
from labkit.resources.node import lab_nodes
from labkit.resources.workload import memory_target

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
SETTLE = dict(timeout=1.5, stable_for=0.3, interval=0.1)
MIB = 2 ** 20
# What the workload program's interpreter holds besides what it allocates (python3 -S -I): about
# 3 MiB measured; a workload must fit its allocation plus this under its limit.
INTERPRETER = 4 * MIB
# The range of that overhead within which a prediction must not depend on it.
INTERPRETER_RANGE = (0, 16 * MIB)


@functools.cache
def _lab_module():
    """lab.py, loaded once (every judgement asks it for the nodes' configuration)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("labkit_lab_resources_env", HERE / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(node_name: str):
    for config, _pods in _lab_module().node_configs():
        if config.name == node_name:
            return config
    raise CheckFailed(f"the lab has no node {node_name}")


def _pristine(file: str, node_name: str) -> dict:
    """The Pods of the lab's own scenario file (the lab's copy, which students do not edit), by
    name: each a copy of the ones read once per process (a check and the mutant run read the same
    file hundreds of times)."""
    path = SCENARIOS / Path(file).name
    stat = path.stat()
    return {p.name: p for p in copy.deepcopy(_pristine_read(path, stat.st_mtime_ns, stat.st_size, node_name))}


@functools.lru_cache(maxsize=16)
def _pristine_read(path: Path, _mtime_ns: int, _size: int, node_name: str) -> list:
    return load_pods(path, node_name, _config(node_name).priority_classes)


def _node(ctx, name: str):
    nodes = lab_nodes(ctx.env)
    if name not in nodes:
        raise CheckFailed(f"node {name} is missing: `labkit run {ctx.lab.id}` repairs the lab")
    return nodes[name]


def _int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise CheckFailed(f"{where}: expected a whole number, got {value!r}")
    return int(value)


def _pod_of(manifest: dict, node_name: str):
    """The Pod object of an observed (stored, defaulted) manifest."""
    config = _config(node_name)
    return pod_from_dict(manifest, f"{node_name}/{manifest['metadata']['name']}", priority_classes=config.priority_classes)


def _diff(a, b, path: str = "") -> list[str]:
    """The paths at which two nested values differ (`spec.containers[0].command`)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in list(a) + [k for k in b if k not in a]:
            child = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(child)
            else:
                out += _diff(a[key], b[key], child)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and not all(
            isinstance(x, str) for x in a + b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def _changed_fields(observed_spec: dict, original_spec: dict, container: str, free: list[tuple[str, str]]) -> list[str]:
    """The fields of a Pod's spec that differ from the scenario's, the exercise's free ones aside."""
    return _diff(without_resources(observed_spec, container, free), without_resources(original_spec, container, free), "spec")


def _container_names(spec: dict) -> list[str]:
    return [c.get("name") for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]


def _describe_changes(pod: str, paths: list[str], spec: dict) -> str:
    """`shop/indexer's command` for spec.containers[1].command, else the path."""
    shown = []
    for path in paths:
        head, _, rest = path.partition("].")
        if head.startswith("spec.containers[") or head.startswith("spec.initContainers["):
            kind = "containers" if head.startswith("spec.containers[") else "initContainers"
            index = int(head.rsplit("[", 1)[1])
            items = spec.get(kind) or []
            name = items[index].get("name") if index < len(items) else f"#{index}"
            field = rest.split(".")[0].split("[")[0] or "container"
            shown.append(f"{pod}/{name}'s {field}")
        else:
            shown.append(f"{pod}'s {path}")
    return ", ".join(dict.fromkeys(shown))


def _answer_kept(ctx) -> bool:
    """Whether the prediction is kept (a labkit tool showed the outcome): it can earn nothing more,
    so feedback may name what is wrong."""
    return predictions.kept(ctx.lab.id, ctx.exercise.id) is not None


def _prediction(ctx):
    """(the answer to grade, a note): the answer kept when a labkit tool first showed the
    exercise's outcome (labkit.predictions), else the answer file."""
    return predictions.graded_answer(ctx)


def _situation(ctx, node_name: str, file: str, names) -> str:
    """A note when the student changed the Pods a prediction is about on the live node."""
    try:
        node = lab_nodes(ctx.env).get(node_name)
    except OSError:
        node = None
    if node is None:
        return ""
    pristine = _pristine(file, node_name)
    changed = []
    for name in names:
        record = node.record(name)
        if record is not None and record["manifest"].get("spec") != pristine[name].manifest.get("spec"):
            changed.append(name)
    if not changed:
        return ""
    return (f"; graded on the Pods as {file} gives them: you changed {', '.join(changed)} on {node_name}, "
            f"which the exercise does not ask (`labkit reset {ctx.lab.id} {ctx.exercise.id}` runs them as built)")


def _container_state(node, record: dict) -> dict:
    """Per container of a Pod on a live node: running, OOM kills, working set, memory limit,
    CFS quota and period."""
    out = {}
    for name, entry in record["containers"].items():
        rel = entry["cgroup"]
        if entry.get("init") and "exit_code" in entry:
            out[name] = {"completed": entry["exit_code"]}
            continue
        if not node.cgroups.exists(rel):
            out[name] = {"running": False, "oom_kills": 0, "working_set": 0, "limit": None, "quota": None,
                         "period": None}
            continue
        memory = node.cgroups.memory(rel)
        quota, period = node.cgroups.quota(rel)
        out[name] = {"running": record["status"]["phase"] == "Running" and bool(node.cgroups.pids(rel)),
                     "oom_kills": memory.oom_kills, "working_set": memory.working_set, "limit": memory.limit,
                     "quota": quota, "period": period}
    return out


def _observe_pods(node, names) -> dict:
    """{pod name: {manifest, phase, reason, containers}} for the Pods on the node (names None: all)."""
    out = {}
    for record in node.records():
        if names is not None and record["name"] not in names:
            continue
        out[record["name"]] = {"manifest": record["manifest"], "phase": record["status"]["phase"],
                               "reason": record["status"].get("reason", ""),
                               "containers": _container_state(node, record)}
    return out


def _settled(observe, done):
    """observe() until done(observation) or the state stops changing (memory being allocated)."""
    first = observe()
    if done(first):
        return first
    return settle(observe, **SETTLE).value


def _overhead(container: dict, target: int | None) -> int:
    """What a running container holds besides its workload's allocation (at least INTERPRETER)."""
    if target is None or not container.get("running"):
        return INTERPRETER
    return max(INTERPRETER, container.get("working_set", 0) - target)


# node-1 holds the Pods of several exercises: those two of them change (throttled's frontend,
# oom's shop) are each judged by their own exercise; every other Pod there stays as it was given.
CHANGED_BY_EXERCISES = {"node-1": {"frontend", "shop"}}


def _others_unchanged(observation: dict, node_name: str, file: str, own: str) -> list[str]:
    """The Pods of the node's scenario that no exercise changes: present, and as given."""
    problems = []
    for name, original in _pristine(file, node_name).items():
        if name == own or name in CHANGED_BY_EXERCISES.get(node_name, set()):
            continue
        live = observation.get(name)
        if live is None:
            problems.append(f"Pod {name} is gone from {node_name}: change only {own}")
        elif live["manifest"].get("spec") != original.manifest.get("spec"):
            changed = _diff(live["manifest"]["spec"], original.manifest["spec"], "spec")
            problems.append(f"{name} was changed ({_describe_changes(name, changed, live['manifest']['spec'])}): "
                            f"change only {own}")
    return problems


# -- qos ------------------------------------------------------------------------------------------

def check_qos(ctx):
    """Solved: the answer gives each listed Pod the QoS class kubelet computes and each of its
    running containers the oom_score_adj kubelet sets, for the Pods as the scenario gives them."""
    node_name = ctx.params["node"]
    capacity = _config(node_name).memory_capacity
    pods = _pristine(ctx.params["file"], node_name)
    names = [n.strip() for n in ctx.params["pods"].split(",")]
    data, note = _prediction(ctx)
    shown = _qos_shown_by_a_server(ctx)
    kept = predictions.kept(ctx.lab.id, ctx.exercise.id)
    if shown is not None and (kept is None or kept.at > shown["at"]) and _answer_written_at(ctx) >= shown["at"]:
        # a prediction is judged as it stood before the outcome was shown: an answer file written
        # (or changed) after a server showed the class of a Pod of this shape earns nothing
        raise CheckFailed(f"{shown['what']} (at {shown['time']}) before your prediction was written, and your answer "
                          "file changed after it: a labkit API server stores every Pod with its QoS class "
                          "(status.qosClass, which `kubectl get` shows), so that showed the outcome, and a prediction "
                          "written after seeing it earns no points (`labkit reset resources qos --forget-prediction` "
                          "forgets it, and the grade report says so). Work the classes out from the spec and "
                          "pkg/apis/core/v1/helper/qos/qos.go (see the hints)",
                          expected="a prediction written before a labkit tool or API server showed the QoS class "
                                   "of these Pods", observed_in=LIVE,
                          observed=f"answer file changed after {shown['what']}")
    given_qos = ctx.answer_field(data, "qos", dict)
    given_adj = ctx.answer_field(data, "oom_score_adj", dict)
    note += _situation(ctx, node_name, ctx.params["file"], names)
    problems, wrong_classes, wrong_adj = [], [], []
    expected_keys = {f"{n}/{c.name}" for n in names for c in pods[n].running_containers()}
    for name in names:
        pod = pods[name]
        answer = given_qos.get(name)
        if answer is None:
            problems.append(f"qos of {name}: missing")
        elif answer not in QOS_CLASSES:
            problems.append(f"qos of {name}: {answer!r} is not one of {', '.join(QOS_CLASSES)}")
        elif answer != qos_class(pod):
            wrong_classes.append(f"the QoS class of {name}")
        for c in pod.running_containers():
            key = f"{name}/{c.name}"
            if key not in given_adj:
                problems.append(f"oom_score_adj of {key}: missing")
                continue
            value = _int(given_adj[key], f"oom_score_adj of {key}")
            if value != kubelet.oom_score_adj(pod, c, capacity):
                wrong_adj.append(key)
    problems += [f"qos: {key!r} is not one of {ctx.params['pods']}" for key in sorted(set(given_qos) - set(names), key=str)]
    problems += [f"oom_score_adj: {key!r} is no running container of {ctx.params['pods']}"
                 for key in sorted(set(given_adj) - expected_keys, key=str)]
    if problems:
        # not a whole prediction yet (situations.prediction_problem: the tools still withhold the
        # outcome): malformed, not counted as a wrong answer
        raise AnswerMalformed("; ".join(problems) + note)
    if (wrong_classes or wrong_adj) and not _answer_kept(ctx):
        # while the answer can earn its points, neither how many cells are wrong nor which: either
        # would let one cell at a time be tried by check runs (CheckContext.grid_feedback)
        return ctx.failed(ctx.grid_feedback(wrong_classes + [f"{k}'s oom_score_adj" for k in wrong_adj],
                                            len(names) + len(expected_keys), "QoS classes and oom_score_adj values")
                          + note)
    if wrong_classes:
        message = ctx.grid_feedback(wrong_classes, len(names), "QoS classes", settled=True)
        if wrong_adj:
            message += (f"; and {len(wrong_adj)} of the {len(expected_keys)} oom_score_adj values "
                        f"{'is' if len(wrong_adj) == 1 else 'are'} wrong: "
                        + ", ".join(f"{k}'s oom_score_adj" for k in wrong_adj))
        return ctx.failed(message + note, expected=f"{len(names)} QoS classes right",
                          observed=f"{len(names) - len(wrong_classes)} right")
    if wrong_adj:
        return ctx.failed(f"{len(wrong_adj)} of the {len(expected_keys)} oom_score_adj values "
                          f"{'is' if len(wrong_adj) == 1 else 'are'} wrong: "
                          + ", ".join(f"{k}'s oom_score_adj" for k in wrong_adj)
                          + " (the QoS classes are right: see policy.go in the third hint)" + note)
    return ctx.passed(f"all {len(names)} QoS classes and {len(expected_keys)} oom_score_adj values right" + note)


def _answer_written_at(ctx) -> float:
    try:
        return ctx.answer_path.stat().st_mtime
    except OSError:
        return 0.0


def _qos_shown_by_a_server(ctx) -> dict | None:
    """The first copy of one of the qos exercise's Pods (its name, and its shape:
    situations.resource_shape, whatever the amounts) that a student's request made a labkit
    embedded API server on this machine create (`labkit apiserver`'s, another lab's:
    labkit.servers; `kubectl create -f scenarios/node-1.yaml` there), since the exercise's last
    --forget-prediction, or
    the try kept before (labkit.predictions.keep_trial: a server's directory removed since does not
    unsee it): {at, time, what}, or None. The server stores a Pod with its QoS class, as the API
    server's pod strategy does (pkg/registry/core/pod/strategy.go, PrepareForCreate: QOSClass =
    qos.GetPodQOS), and `kubectl get pod -o yaml` shows it: the outcome the exercise asks to predict."""
    from labkit import servers
    from labkit.apiserver import audit as audit_log
    from labkit.resources import situations

    since = max((e["at"] for e in predictions.forgotten(ctx.lab.id, ctx.exercise.id)), default=0.0)
    first = predictions.kept_trial(ctx.lab.id, ctx.exercise.id)
    originals = situations.qos_pods(ctx.lab)
    for target in servers.others(None):
        for e in servers.lines_with(target.state_dir, "audit.log", ('"resource":"pods"',)):
            ref = e.get("objectRef") or {}
            body = e.get("requestObject")
            if e.get("verb") != "create" or ref.get("resource") != "pods" or ref.get("subresource") \
                    or (e.get("responseStatus") or {}).get("code") != 201 or not isinstance(body, dict):
                continue
            at = audit_log.received_at(e)
            name = ref.get("name") or (body.get("metadata") or {}).get("name")
            if at < since or (first is not None and first["at"] <= at) or name not in originals \
                    or (e.get("user") or {}).get("username", "").startswith("system:"):
                continue
            try:
                shaped = situations.resource_shape(pod_from_dict(body, validation=False)) == \
                    situations.resource_shape(originals[name])
            except Exception:       # a Pod labkit's nodes would not read: no copy of the exercise's
                continue
            if shaped:
                first = {"at": at, "time": e.get("requestReceivedTimestamp", "")[11:19],
                         "what": f"the labkit API server of {target.state_dir} created Pod "
                                 f"{ref.get('namespace')}/{name}, a copy of the exercise's"}
    return None if first is None else predictions.keep_trial(ctx.lab.id, ctx.exercise.id, first)


# -- throttled ------------------------------------------------------------------------------------

def _longest_ms(work_ms: float, quota_us: int, period_us: int) -> float:
    """The longest one request of work_ms of CPU takes under a CFS quota per period when it finds
    the quota unspent (kernel/sched/fair.c CFS bandwidth: the group runs until the period's quota
    is used, then waits for the refill at the period's end): it starts as a period begins. One
    that starts closer to the refill waits less (down to none: work_ms)."""
    quota_ms, period_ms = quota_us / 1000, period_us / 1000
    if quota_us <= 0:
        return work_ms
    full = math.ceil(work_ms / quota_ms) - 1
    return full * period_ms + (work_ms - full * quota_ms)


THROTTLED_FREE = [("requests", "cpu"), ("limits", "cpu")]
MAX_REQUEST_MILLI = 1000     # a request above one CPU reserves far more than the server uses
# A CPU limit must leave the server twice what it uses: with a quota about as large as its use,
# any CPU beyond one request's work in a period (the interpreter's own, a late request sharing a
# period with the next) spends the quota and the kernel throttles it (measured on the lab: 150m
# of limit for 150m of use throttled 21 of 30 periods, 300m none).
HEADROOM = 2
# The kernel's own verdict: the container's cpu.stat read twice this far apart (ten CFS periods);
# a throttled period between the two reads means a quota still holds it back.
WATCH_SECONDS = 1.0


def _throttling(node, record: dict, container: str) -> dict | None:
    entry = record["containers"].get(container)
    if entry is None or not node.cgroups.exists(entry["cgroup"]):
        return None
    stats = node.cgroups.cpu(entry["cgroup"])
    return {"periods": stats.nr_periods, "throttled": stats.nr_throttled}


def observe_throttled(ctx):
    """The Pods on the node: their stored spec, status and each container's cgroup state; for the
    exercise's container also how many CFS periods it ran in and was throttled in while watched."""
    import time

    p = ctx.params
    node = _node(ctx, p["node"])
    record = node.record(p["pod"])
    before = _throttling(node, record, p["container"]) if record else None
    if before is not None:
        time.sleep(WATCH_SECONDS)
    observation = _observe_pods(node, None)
    live = observation.get(p["pod"])
    after = _throttling(node, node.record(p["pod"]), p["container"]) if before is not None else None
    if live is not None and p["container"] in live["containers"] and after is not None:
        live["containers"][p["container"]]["watched"] = {
            "periods": after["periods"] - before["periods"], "throttled": after["throttled"] - before["throttled"]}
    return observation


def _explanation_problems(ctx, settings, work_ms) -> list[str]:
    problems = []
    try:
        data = ctx.answer()
        quota = _int(ctx.answer_field(data, "quota_us", (int, float)), "quota_us")
        period = _int(ctx.answer_field(data, "period_us", (int, float)), "period_us")
        request_ms = ctx.answer_field(data, "request_ms", (int, float))
        if isinstance(request_ms, bool):
            raise CheckFailed("request_ms: expected a number")
        wrong = [name for name, right in (("quota_us", quota == settings.cpu_quota),
                                          ("period_us", period == settings.cpu_period),
                                          ("request_ms", abs(request_ms - _longest_ms(work_ms, settings.cpu_quota,
                                                                                      settings.cpu_period)) <= 0.5))
                 if not right]
        if not wrong:   # a failure is then about the Pod, not a wrong answer (run_check counts none)
            ctx.answer_not_wrong = True
        if wrong:       # counted, never named: naming the wrong value would let values be tried one by one
            problems.append(ctx.grid_feedback(
                wrong, 3, "values (quota_us, period_us, request_ms)", noun="explanation",
                advice="the quota and period are what kubelet derives from the CPU limit of the Pod as it was given "
                       "(MilliCPUToQuota; the container cgroup's cpu.cfs_quota_us and cpu.cfs_period_us, or cpu.max); "
                       "a request needing more CPU than one period's quota waits for the next period, longest when "
                       "it starts as a period begins"))
    except CheckFailed as exc:
        problems.append(exc.message)
        ctx.answer_not_wrong = isinstance(exc, (AnswerMissing, AnswerMalformed))
    return problems


def judge_throttled(ctx, observation):
    """Solved: the explanation (quota, period, and the longest a request takes finding the quota
    unspent, for the Pod as given) is right; the other Pods of the node that no exercise changes
    are as given; the Pod runs with its server container's cpu request covering what it uses
    (work/every), at most one CPU, no CFS quota below twice that, neither in its spec nor in its
    cgroup, and no period throttled while the check watched (cpu.stat); nothing else of the Pod
    changed (its command, memory, name, containers)."""
    p = ctx.params
    need_milli = p["work_ms"] * 1000 // p["every_ms"]
    original = _pristine("node-1.yaml", p["node"])[p["pod"]]
    container = next(c for c in original.containers if c.name == p["container"])
    problems = _explanation_problems(ctx, kubelet.container_cgroup(original, container), p["work_ms"])
    problems += _others_unchanged(observation, p["node"], "node-1.yaml", p["pod"])
    live = observation.get(p["pod"])
    if live is None:
        problems.append(f"Pod {p['pod']} is not on {p['node']}: run it with `labkit resources apply -f FILE`")
        return ctx.failed("; ".join(problems))
    spec = live["manifest"]["spec"]
    changed = _changed_fields(spec, original.manifest["spec"], p["container"], THROTTLED_FREE)
    if changed:
        problems.append(f"{_describe_changes(p['pod'], changed, spec)} changed: the exercise changes only "
                        f"{p['container']}'s CPU request and limit (the workload and its memory stay the scenario's)")
        return ctx.failed("; ".join(problems))
    pod = _pod_of(live["manifest"], p["node"])
    server = next(c for c in pod.containers if c.name == p["container"])
    settings = kubelet.container_cgroup(pod, server)
    state = live["containers"].get(p["container"], {})
    request = server.requests.get("cpu")
    quota, period = settings.cpu_quota or 0, settings.cpu_period or kubelet.QUOTA_PERIOD
    if quota > 0 and quota * 1000 // period < HEADROOM * need_milli:
        problems.append(f"{p['container']} is still throttled: the CFS quota its CPU limit gives it per period is "
                        + ("less than it needs" if quota * 1000 // period < need_milli else
                                                   "hardly more than it uses: the quota is spent as soon as a period "
                                                   "holds a little more than one request's work (the interpreter's own, "
                                                   "a late request sharing the period with the next)"))
    elif state.get("quota") and state["quota"] > 0 and state["quota"] * 1000 // state["period"] < HEADROOM * need_milli:
        problems.append(f"{p['container']} is still throttled: its cgroup's CFS quota per period is not well above "
                        "what it uses")
    elif (state.get("watched") or {}).get("throttled", 0) > 0:
        watched = state["watched"]
        resized = ((live["manifest"].get("metadata") or {}).get("generation") or 1) > 1
        problems.append(f"{p['container']} is still throttled: the kernel held it back in {watched['throttled']} of the "
                        f"{watched['periods']} CFS periods it ran in while the check watched (cpu.stat nr_throttled; "
                        "`labkit resources top` shows it too)"
                        + (f". {p['pod']} was resized in place: the requests that queued while the old quota held "
                           f"{p['container']} back are still being worked off, each period as much as its new quota "
                           "allows (its log's slowest request falls as they are); check again once that is done, or "
                           "delete the Pod and apply it, which starts it afresh" if resized else ""))
    if request is None or request.milli_value() < need_milli:
        problems.append(f"{p['container']}'s cpu request does not cover what it uses: under contention its "
                        "cpu.shares/cpu.weight would not get it its CPU")
    elif request.milli_value() > MAX_REQUEST_MILLI:
        problems.append(f"{p['container']}'s cpu request is more than a CPU: it reserves far more than it uses, CPU the "
                        "node cannot give other Pods")
    if live["phase"] != "Running":
        problems.append(f"Pod {p['pod']} on {p['node']} is {live['phase']}" + (f" ({live['reason']})" if live["reason"] else ""))
    elif not state.get("running"):
        problems.append(f"container {p['container']} is not running")
    if problems:
        return ctx.failed("; ".join(problems))
    return ctx.passed(f"explained, and {p['pod']}/{p['container']} runs with a request that covers its use and "
                      "no CFS quota holding it back")


def check_throttled(ctx):
    return judge_throttled(ctx, observe_throttled(ctx))


# -- oom ------------------------------------------------------------------------------------------

OOM_FREE = [("limits", "memory"), ("requests", "memory")]
ROOM = 2        # a limit holds what the container uses, with room: at most twice that
MIN_ROOM = 1.1  # and at least a tenth more: a limit about as large as the use is reached by the next allocation


def _oom_truth(pod) -> tuple[str, str]:
    """The container whose workload needs more than its memory limit, and where it hits: its own
    limit, or (no own limit) the pod/node above it."""
    for c in pod.running_containers():
        target = memory_target(c.command)
        limit = c.limits.get("memory")
        if target is not None and limit is not None and target > limit.value_int():
            return c.name, "limit"
    raise CheckFailed("the lab's scenario has no container that outgrows its limit: reinstall the lab")


def observe_oom(ctx):
    """The Pod on the node, once each of its containers holds its memory or has stopped."""
    node = _node(ctx, ctx.params["node"])
    name = ctx.params["pod"]

    def observe():
        return _observe_pods(node, None)

    def done(observation):
        live = observation.get(name)
        if live is None or live["phase"] != "Running":
            return True
        commands = {c["name"]: c.get("command") or [] for c in live["manifest"]["spec"].get("containers") or []}
        for cname, state in live["containers"].items():
            target = memory_target(commands.get(cname, []))
            if state.get("running") and not state.get("oom_kills") and target and state["working_set"] < target:
                return False
        return True

    return _settled(observe, done)


def judge_oom(ctx, observation):
    """Solved: the answer names the container the kernel killed and why (for the Pod as given);
    the Pod runs with every container holding all the memory its command allocates, none
    OOM-killed, the other Pods of the node that no exercise changes as given, the killed one under a
    memory limit of its own that holds it with room, at least a tenth more and at most twice what it uses; nothing of the Pod but that container's memory request and limit changed (the
    commands are the workload)."""
    p = ctx.params
    problems = []
    original = _pristine("node-1.yaml", p["node"])[p["pod"]]
    killed, cause = _oom_truth(original)
    try:
        data = ctx.answer()
        container = ctx.answer_field(data, "container", str)
        given_cause = ctx.answer_field(data, "cause", str)
        names = [c.name for c in original.running_containers()]
        if container not in names:
            problems.append(f"container: {p['pod']} has no container {container!r} (`labkit resources get {p['pod']}` "
                            "lists its containers)")
        if given_cause not in ("limit", "node"):
            problems.append(f"cause: expected limit or node, got {given_cause!r}")
        ctx.answer_not_wrong = not problems and container == killed and given_cause == cause
        if not problems and (container != killed or given_cause != cause):
            # two values of two choices each: naming the wrong one would name the right one, so the
            # feedback says where the kernel records both, and neither which nor how many are wrong
            problems.append(ctx.grid_feedback(
                [v for v, wrong in (("container", container != killed), ("cause", given_cause != cause)) if wrong],
                2, "values (container, cause)", noun="answer",
                advice=f"the kernel's counters name both: which of {p['pod']}'s container cgroups counted an OOM kill "
                       "(`labkit resources get`, memory.oom_control or memory.events), and whose memory ran out: "
                       "`labkit resources oom-kills` gives the cgroup whose limit was hit (oom_memcg, or global_oom) "
                       "beside the one the killed process lived in (task_memcg)"))
    except CheckFailed as exc:
        problems.append(exc.message)
        ctx.answer_not_wrong = isinstance(exc, (AnswerMissing, AnswerMalformed))
    problems += _others_unchanged(observation, p["node"], "node-1.yaml", p["pod"])
    live = observation.get(p["pod"])
    if live is None:
        problems.append(f"Pod {p['pod']} is not on {p['node']}: run the fixed Pod with `labkit resources apply -f FILE`")
        return ctx.failed("; ".join(problems))
    if live["phase"] != "Running":
        problems.append(f"Pod {p['pod']} on {p['node']} is {live['phase']}" + (f" ({live['reason']})" if live["reason"] else ""))
        return ctx.failed("; ".join(problems))
    spec = live["manifest"]["spec"]
    changed = _changed_fields(spec, original.manifest["spec"], killed, OOM_FREE)
    if changed:
        problems.append(f"{_describe_changes(p['pod'], changed, spec)} changed: the workloads (the commands) and the "
                        f"other containers are the scenario's; fix only the memory of the container that was killed")
        return ctx.failed("; ".join(problems))
    pod = _pod_of(live["manifest"], p["node"])
    capacity = _config(p["node"]).memory_capacity
    unchanged_spec = spec == original.manifest["spec"]
    for c in pod.running_containers():
        state = live["containers"].get(c.name, {})
        target = memory_target(c.command) or 0
        limit = c.limits.get("memory")
        limit_bytes = limit.value_int() if limit is not None and limit.value else None
        if c.name == killed and limit_bytes is None:
            problems.append("the killed container keeps no memory limit: without one it can take the node's memory")
            continue
        if c.name == killed and limit_bytes >= capacity:
            problems.append("the killed container's memory limit is not below the node's memory: it holds nothing back")
            continue
        if c.name == killed and limit_bytes > ROOM * (target + _overhead(state, target)):
            problems.append("the killed container's memory limit is far above what it uses (more than twice its memory "
                            "in `labkit resources top`): it would let a leak take memory the node never planned for")
            continue
        if state.get("oom_kills") or (limit_bytes is not None and target + _overhead(state, target) > limit_bytes):
            if unchanged_spec:
                problems.append(f"{p['pod']} is still as it was given: one of its containers is OOMKilled")
            else:
                problems.append("a container was OOMKilled again: its memory limit is still below what it uses")
        elif c.name == killed and limit_bytes < MIN_ROOM * (target + _overhead(state, target)):
            problems.append("the killed container's memory limit leaves hardly any room above what it uses (less than a "
                            "tenth more than its memory in `labkit resources top`: what its command allocates and the "
                            "interpreter running it): the next allocation, or the interpreter growing, reaches it and "
                            "the kernel kills it again")
        elif not state.get("running"):
            problems.append("a container of the Pod is not running")
        elif state.get("working_set", 0) < target:
            problems.append("a container of the Pod is still allocating its memory: check again in a moment")
    if problems:
        return ctx.failed("; ".join(problems))
    return ctx.passed(f"{killed} runs with all the memory it needs under a limit that holds it, no OOM kill")


def check_oom(ctx):
    return judge_oom(ctx, observe_oom(ctx))


# -- noisy-neighbour ------------------------------------------------------------------------------

NOISY_FREE = [("limits", "memory"), ("requests", "memory")]
FILLED = 0.7        # the cache has filled when it holds this much of its limit (it fills 3/4)
CACHE_KEPT = 1 / 3  # the fix keeps at least this share of the cache the node can hold above its threshold


def cache_room(config, others_working_set: int, cache_overhead: int) -> int:
    """The largest cache the node can hold while memory.available stays at or above its hard
    eviction threshold: its memory capacity minus the threshold, minus what every other Pod and
    the cache's own interpreter hold (memory.available = capacity - working set, as kubelet's
    eviction manager computes it: pkg/kubelet/eviction/helpers.go makeSignalObservations)."""
    return config.memory_capacity - config.eviction_hard_bytes() - others_working_set - cache_overhead


def cache_shrunk_too_far(cache_bytes: int, room: int) -> bool:
    """Whether the fix threw away more of the cache than the node needs: the cache holds less than
    CACHE_KEPT of the largest one the node can hold above its threshold (a limit of a few MiB
    "fixes" any noisy neighbour by leaving it nothing to do)."""
    return cache_bytes < CACHE_KEPT * room


def observe_noisy_neighbour(ctx):
    """Every Pod on the node and memory.available, once the caches have filled or stopped."""
    node = _node(ctx, ctx.params["node"])

    def observe():
        available, _ws = node.memory_available()
        return {"pods": _observe_pods(node, None), "available": available}

    def done(observation):
        for live in observation["pods"].values():
            spec = live["manifest"]["spec"]
            commands = {c["name"]: c.get("command") or [] for c in spec.get("containers") or []}
            for cname, state in live["containers"].items():
                target = memory_target(commands.get(cname, []), state.get("limit"))
                if state.get("running") and not state.get("oom_kills") and target and state["working_set"] < target:
                    return False
        return True

    return _settled(observe, done)


def judge_noisy_neighbour(ctx, observation):
    """Solved: the node's three Pods run (none added), none OOM-killed, each holding what its
    command allocates; cache keeps a memory limit, below the node's memory, and fills its cache
    to what that limit allows, at least a third as large a cache as the node can hold for it above
    its threshold (a limit of a few MiB throws the cache away rather than fitting it); memory.available stays at or above the eviction threshold, on the
    node and as labkit reconstructs it from the specs; storefront and cron are as given, and of
    cache only its memory request and limit changed, the request not below the scenario's (a
    lower one reserves even less of what it takes: the prompt's trouble made worse)."""
    p = ctx.params
    node_name, cache = p["node"], p["pod"]
    config = _config(node_name)
    pristine = _pristine("node-2.yaml", node_name)
    pods = observation["pods"]
    problems = []
    for name in pristine:
        live = pods.get(name)
        if live is None:
            problems.append(f"Pod {name} is not on {node_name}")
        elif live["phase"] != "Running":
            problems.append(f"{name} is not running ({live['reason'] or live['phase']})")
    problems += [f"Pod {name} was added on {node_name}: change only {cache}" for name in pods if name not in pristine]
    for name, original in pristine.items():
        live = pods.get(name)
        if live is None:
            continue
        spec = live["manifest"]["spec"]
        if name != cache and spec != original.manifest["spec"]:
            problems.append(f"{name} was changed ({_describe_changes(name, _diff(spec, original.manifest['spec'], 'spec'), spec)}): "
                            f"fix only {cache}")
        elif name == cache:
            only = original.containers[0].name
            changed = _changed_fields(spec, original.manifest["spec"], only, NOISY_FREE)
            if changed:
                problems.append(f"{_describe_changes(name, changed, spec)} changed: of {cache} only its memory request and "
                                "limit are yours to change (the command is the workload)")
            elif _memory_request(spec, only) < _memory_request(original.manifest["spec"], only):
                problems.append(f"{cache}'s memory request is below what the scenario gives it: it would reserve even less "
                                "of the memory it takes, and the node's accounting (the scheduler's fit, kubelet's "
                                "eviction ranking) would count less of it; the request may stay or rise, not fall")
    if problems:
        return ctx.failed("; ".join(problems))
    requested = sum(pod_request(_pod_of(live["manifest"], node_name), "memory").value_int() for live in pods.values())
    if requested > config.allocatable_memory:      # GeneralPredicates' resource fit (lifecycle/predicate.go)
        return ctx.failed(f"{cache} is not running: the Pods' memory requests exceed {node_name}'s allocatable (OutOfmemory)")
    threshold = config.eviction_hard_bytes()
    predicted_ws = 0
    cache_bytes = cache_overhead = 0
    for name, live in pods.items():
        pod = _pod_of(live["manifest"], node_name)
        for c in pod.running_containers():
            state = live["containers"].get(c.name, {})
            limit = c.limits.get("memory")
            limit_bytes = limit.value_int() if limit is not None and limit.value else None
            if name == cache and limit_bytes is None:
                return ctx.failed(f"{cache} has no memory limit: it sizes its cache to all the memory it sees")
            if name == cache and limit_bytes >= config.memory_capacity:
                return ctx.failed(f"{cache}'s memory limit is not below {node_name}'s memory: it holds nothing back")
            target = memory_target(c.command, limit_bytes) or 0
            overhead = _overhead(state, memory_target(c.command, state.get("limit")))
            if state.get("oom_kills") or (limit_bytes is not None and target + overhead > limit_bytes):
                return ctx.failed(f"OOMKilled on {node_name}: {name}")
            if not state.get("running"):
                return ctx.failed(f"stopped on {node_name}: {name}")
            predicted_ws += target + overhead
            if name == cache:
                cache_bytes, cache_overhead = target, overhead
            if name == cache and state.get("working_set", 0) < FILLED * (state.get("limit") or limit_bytes):
                return ctx.failed(f"{cache} did not fill its cache (or is still filling it: check again in a moment)")
    available = min(observation["available"], config.memory_capacity - predicted_ws)
    if available < threshold:
        return ctx.failed(f"{node_name}'s memory.available ({available // MIB}Mi) is still below its eviction threshold "
                          f"({threshold // MIB}Mi): {cache}'s limit still lets it take memory nobody reserved")
    if cache_shrunk_too_far(cache_bytes, cache_room(config, predicted_ws - cache_bytes - cache_overhead, cache_overhead)):
        return ctx.failed(f"{cache}'s limit leaves it a {cache_bytes // MIB}Mi cache, less than a third of the one "
                          f"{node_name} can hold for it above its eviction threshold: the fix throws away more of the "
                          f"cache than the node needs. Size the limit to what the node has left for {cache} "
                          f"(`labkit resources nodes`, `labkit resources top --node {node_name}`)")
    return ctx.passed(f"{node_name} has {observation['available'] // MIB}Mi available (threshold {threshold // MIB}Mi) "
                      "with all Pods running")


def _memory_request(spec: dict, container: str) -> int:
    """A container's memory request in bytes in a stored (defaulted) spec; 0 without one."""
    for c in spec.get("containers") or []:
        if c.get("name") == container:
            value = ((c.get("resources") or {}).get("requests") or {}).get("memory")
            return Quantity.parse(str(value)).value_int() if value is not None else 0
    return 0


def check_noisy_neighbour(ctx):
    return judge_noisy_neighbour(ctx, observe_noisy_neighbour(ctx))


# -- eviction-order -------------------------------------------------------------------------------

def reconstructed_ranking(file: str, node_name: str) -> list[str]:
    """rankMemoryPressure (labkit.resources.eviction.rank, helpers.go) of the scenario's Pods,
    each using what its workload allocates plus the interpreter: the same for every overhead in
    INTERPRETER_RANGE, else the scenario is ambiguous."""
    pods = _pristine(file, node_name)
    orders = set()
    for overhead in INTERPRETER_RANGE:
        candidates = []
        for pod in pods.values():
            usage = sum((memory_target(c.command) or 0) + overhead for c in pod.running_containers())
            candidates.append(eviction.Candidate(pod, usage, pod_request(pod, "memory").value_int()))
        orders.add(tuple(c.pod.name for c in eviction.rank(candidates)))
    if len(orders) != 1:
        raise CheckFailed(f"the ranking of {file} depends on the interpreter's memory: reinstall the lab")
    return list(orders.pop())


def observe_eviction_order(ctx):
    """The ranking the eviction manager computed on the node (None: it never evicted these Pods)
    and the specs of the Pods on the node."""
    node = _node(ctx, ctx.params["node"])
    names = set(_pristine(ctx.params["file"], ctx.params["node"]))
    ranked = _first_ranking(node, names)
    return {"ranking": [c["pod"] for c in ranked] if ranked else None,
            "specs": {r["name"]: r["manifest"].get("spec") for r in node.records()},
            "rejected": sorted(r["name"] for r in node.records() if r["name"] in names
                               and r["status"].get("phase") == "Failed" and r["status"].get("reason") == "Evicted"),
            "file_edited": _copy_edited(ctx, ctx.params["file"])}


def _copy_edited(ctx, file: str) -> bool:
    """Whether the student's copy of a scenario file (in the lab directory) differs from the lab's."""
    try:
        return (Path(ctx.env.dir) / file).read_text() != (SCENARIOS / Path(file).name).read_text()
    except OSError:
        return False


def judge_eviction_order(ctx, observation):
    """Solved: the prediction (as it was when `labkit resources evict` first showed a ranking)
    is kubelet's full ranking of the scenario's six Pods, as labkit reconstructs it from the
    file; and the student watched the eviction manager rank and evict them on the node."""
    p = ctx.params
    pods = _pristine(p["file"], p["node"])
    data, note = _prediction(ctx)
    given = [str(n) for n in ctx.answer_field(data, "order", list)]
    if sorted(given) != sorted(pods):
        # not a whole prediction (situations.prediction_problem): malformed, not counted
        raise AnswerMalformed(f"order: expected each of the {len(pods)} Pods of {p['file']} exactly once" + note)
    truth = reconstructed_ranking(p["file"], p["node"])
    changed = [n for n, spec in observation["specs"].items() if n in pods and spec != pods[n].manifest.get("spec")]
    changed += [n for n in observation["specs"] if n not in pods]
    if changed:
        edited = (f"; your copy of {p['file']} was edited, and the prediction is about the Pods as the lab gave "
                  "them") if observation.get("file_edited") else ""
        note += (f"; graded on the Pods as the lab gives them in {p['file']}: {p['node']} runs "
                 f"{', '.join(sorted(changed))} otherwise than the lab's file{edited} (`labkit reset {ctx.lab.id} "
                 f"{ctx.exercise.id}` empties the node)")
    if given != truth:
        if given in _qos_orders(pods):
            return ctx.failed("that is the order of the QoS classes: kubelet's eviction manager does not rank by QoS "
                              "class (see the first hint)" + note)
        if given == _without_priority(pods, truth):
            return ctx.failed("the order ignores priority: among the Pods above their request, the lower priority "
                              "goes first" + note)
        wrong = [f"place {i + 1} ({a})" for i, (a, b) in enumerate(zip(given, truth)) if a != b]
        if not _answer_kept(ctx):       # no count of the right places either (CheckContext.grid_feedback)
            return ctx.failed(ctx.grid_feedback(wrong, len(truth), "places") + note)
        return ctx.failed(ctx.grid_feedback(wrong, len(truth), "places", settled=True) + note,
                          expected=f"{len(truth)} right", observed=f"{len(truth) - len(wrong)} right")
    if observation["ranking"] is None:
        rejected = observation.get("rejected") or []
        # kubelet's admission rejects BestEffort Pods while the node has MemoryPressure (an earlier
        # eviction run set it, for evictionPressureTransitionPeriod): without them the rest may
        # never meet the threshold, and evict ranks nothing
        why = (f" ({', '.join(rejected)} {'is' if len(rejected) == 1 else 'are'} Failed, reason Evicted: kubelet "
               f"rejected {'it' if len(rejected) == 1 else 'them'} while {p['node']} had the MemoryPressure condition "
               f"an earlier eviction run left, `labkit resources nodes` shows it; `labkit reset {ctx.lab.id} "
               f"{ctx.exercise.id}` empties the node and starts its eviction manager afresh)" if rejected else "")
        return ctx.failed(f"the prediction is in; you have not watched it yet: no eviction on {p['node']} ranked these "
                          f"Pods{why}. Apply {p['file']}, wait until they hold their memory, then "
                          f"`labkit resources evict --node {p['node']}`" + note)
    if observation["ranking"] != truth and changed:
        # what was watched is the ranking of other Pods: the exercise asks to watch the scenario's
        return ctx.failed(f"you have not watched these Pods yet: the eviction you watched on {p['node']} ranked Pods "
                          f"that are not the lab's, in another order than it ranks the Pods of {p['file']}" + note
                          + f", then apply {p['file']} and evict again")
    if observation["ranking"] != truth:
        return ctx.failed(f"the eviction manager ranked the Pods before they held their memory: reset the exercise, "
                          f"apply {p['file']}, wait (`labkit resources top --node {p['node']}`), then evict" + note)
    # it evicts from the top of the ranking until memory.available is back above the threshold plus
    # the minimum reclaim: the last Pods of the order may stay
    return ctx.passed("the eviction manager ranks them exactly so, and you watched it rank them and evict from the top "
                      "of that order" + note)


def check_eviction_order(ctx):
    return judge_eviction_order(ctx, observe_eviction_order(ctx))


def _without_priority(pods: dict, truth: list[str]) -> list[str]:
    usage = {}
    for name, pod in pods.items():
        usage[name] = sum((memory_target(c.command) or 0) + INTERPRETER for c in pod.running_containers())
    request = {n: pod_request(pod, "memory").value_int() for n, pod in pods.items()}
    return sorted(truth, key=lambda n: (not usage[n] > request[n], -(usage[n] - request[n])))


def _first_ranking(node, names: set) -> list[dict] | None:
    """The ranking of the latest eviction on the node that ranked all of `names` (restricted to them)."""
    import json
    try:
        runs = json.loads((node.dir / "eviction.json").read_text())
    except (OSError, ValueError):
        return None
    for run in reversed(runs):
        for one in run:
            if one["evicted"] and names <= {c["pod"] for c in one["ranking"]}:
                return [c for c in one["ranking"] if c["pod"] in names]
    return None


def _qos_orders(pods: dict) -> list[list[str]]:
    """Every order that only sorts by QoS class (BestEffort, Burstable, Guaranteed), any order within."""
    import itertools
    groups = {}
    for name in pods:
        groups.setdefault(qos_class(pods[name]), []).append(name)
    out = []
    parts = [groups.get(q, []) for q in (BEST_EFFORT, BURSTABLE, GUARANTEED)]
    for a in itertools.permutations(parts[0]):
        for b in itertools.permutations(parts[1]):
            for c in itertools.permutations(parts[2]):
                out.append([*a, *b, *c])
    return out


# -- weight ---------------------------------------------------------------------------------------

def check_weight(ctx):
    """Solved: the answer gives the value kubelet writes into the Pod's pod cgroup (cpu.weight on
    cgroup v2, cpu.shares on v1), for the Pod as the scenario gives it, and the smallest and
    largest CPU request of the Pod that give exactly that value."""
    p = ctx.params
    node = _node(ctx, p["node"])
    v2 = node.cgroups.version == "v2"
    key = "cpu.weight" if v2 else "cpu.shares"
    original = _pristine("node-1.yaml", p["node"])[p["pod"]]
    shares = kubelet.pod_cgroup(original).cpu_shares
    truth = kubelet.shares_to_weight(shares) if v2 else shares
    lo, hi = kubelet.weight_to_milli_range(truth) if v2 else kubelet.shares_to_milli_range(truth)
    data, note = _prediction(ctx)
    note += _situation(ctx, p["node"], "node-1.yaml", [p["pod"]])
    given = _int(ctx.answer_field(data, "cgroup_value", (int, float)), "cgroup_value")
    given_lo = _millicores(ctx, data, "min_millicores")
    given_hi = _millicores(ctx, data, "max_millicores")
    if given != truth:
        return ctx.failed(_wrong_value(ctx, node, key, given) + note)
    problems = []
    if given_lo != lo:
        problems.append("min_millicores is not the smallest request giving this value")
    if given_hi != hi:
        problems.append("max_millicores is not the largest request giving this value")
    if problems and not _answer_kept(ctx):      # which end is wrong would let each be tried on its own
        return ctx.failed(ctx.grid_feedback(problems, 2, "ends of the range (min_millicores, max_millicores)",
                                            advice="invert each step as a range") + note)
    if problems:
        return ctx.failed("; ".join(problems) + " (invert each step as a range)" + note)
    return ctx.passed(f"{key} {truth}: requests {lo}m to {hi}m give it" + note)


def _millicores(ctx, data, key: str) -> int:
    """A CPU request in millicores as the answer gives it: a number (250), or the quantity as a Pod
    writes it (250m)."""
    value = ctx.answer_field(data, key, (int, float, str))
    if isinstance(value, str):
        found = re.fullmatch(r"\s*(\d+)m\s*", value)
        if found is None:
            raise AnswerMalformed(f"{key} should be a number of millicores (as 250, or 250m), not {value!r}\n"
                                  f"  {ctx.answer_path}")
        return int(found.group(1))
    return _int(value, key)


def _wrong_value(ctx, node, key: str, given: int) -> str:
    """Which cgroup the wrong value was read from, when it is one of the Pod's neighbours."""
    p = ctx.params
    record = node.record(p["pod"])
    if record is not None:
        def value(rel: str):
            return node.cgroups.settings(rel).get(key) if node.cgroups.exists(rel) else None
        containers = {value(c["cgroup"]) for c in record["containers"].values()}
        if given in containers:
            return f"cgroup_value: that is a container cgroup's {key}; the pod cgroup is one level up"
        if given == value(record["cgroup"].rsplit("/", 1)[0]):
            return (f"cgroup_value: that is the QoS cgroup's {key} (all its Pods together); the pod cgroup "
                    "is one level down")
    return f"cgroup_value: not the {key} of {p['pod']}'s pod cgroup"
