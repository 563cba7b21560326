"""Checks of the resources lab.

Truth comes from labkit's reconstruction of kubelet (labkit.resources: QoS, oom_score_adj, CFS
quota, the eviction ranking) applied to the lab's pristine scenario files, or from the live
kernel: cgroup files and counters, /proc. Nothing here depends on timing: throttling is judged
from the quota the kernel enforces (a container whose quota per period holds the CPU it needs, or
that has no quota, cannot be throttled for lack of it, whatever the load), OOM from the kernel's
kill counters and the memory a workload reached, eviction from the ranking the eviction manager
computed on the usage it measured. Where state still converges (memory being allocated), the
check waits a little for it (labkit.exercises.settle) and otherwise says it is still changing.
"""

import math
from pathlib import Path

from labkit.exercises import CheckFailed, settle
from labkit.resources import kubelet
from labkit.resources.node import lab_nodes
from labkit.resources.workload import memory_target
from labkit.resources.pods import BEST_EFFORT, BURSTABLE, GUARANTEED, load_pods, qos_class

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
SETTLE = dict(timeout=1.5, stable_for=0.3, interval=0.1)


def _lab_module():
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
    config = _config(node_name)
    return {p.name: p for p in load_pods(SCENARIOS / Path(file).name, node_name, config.priority_classes)}


def _node(ctx, name: str):
    nodes = lab_nodes(ctx.env)
    if name not in nodes:
        raise CheckFailed(f"node {name} is missing: `labkit run {ctx.lab.id}` repairs the lab")
    return nodes[name]


def _running(node, pod_name: str) -> dict:
    record = node.record(pod_name)
    if record is None:
        raise CheckFailed(f"Pod {pod_name} is not on {node.name}: run it with `labkit resources apply -f FILE`")
    status = record["status"]
    if status["phase"] != "Running":
        raise CheckFailed(f"Pod {pod_name} on {node.name} is {status['phase']}"
                          + (f" ({status.get('reason')}: {status.get('message')})" if status.get("reason") else ""))
    return record


def _verdict(ctx, wrong: list[str], total: int, what: str):
    if not wrong:
        return ctx.passed(f"all {total} {what} right")
    return ctx.failed(f"{len(wrong)} of {total} {what} wrong: " + "; ".join(wrong),
                      expected=f"{total} right", observed=f"{total - len(wrong)} right")


def _int(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise CheckFailed(f"{where}: expected a whole number, got {value!r}")
    return int(value)


def _workload_target(container) -> int | None:
    """Bytes an `alloc` workload allocates (from its command), or None."""
    return memory_target(container.command)


# -- qos ------------------------------------------------------------------------------------------

def check_qos(ctx):
    node_name = ctx.params["node"]
    capacity = _config(node_name).memory_capacity
    pods = _pristine(ctx.params["file"], node_name)
    names = [n.strip() for n in ctx.params["pods"].split(",")]
    data = ctx.answer()
    given_qos = ctx.answer_field(data, "qos", dict)
    given_adj = ctx.answer_field(data, "oom_score_adj", dict)
    wrong, total = [], 0
    for name in names:
        pod = pods[name]
        total += 1
        answer = given_qos.get(name)
        if answer is None:
            wrong.append(f"qos of {name}: missing")
        elif answer not in QOS_CLASSES:
            wrong.append(f"qos of {name}: {answer!r} is not one of {', '.join(QOS_CLASSES)}")
        elif answer != qos_class(pod):
            wrong.append(f"{name}: not {answer}")
        for c in pod.running_containers():
            total += 1
            key = f"{name}/{c.name}"
            if key not in given_adj:
                wrong.append(f"oom_score_adj of {key}: missing")
                continue
            value = _int(given_adj[key], f"oom_score_adj of {key}")
            if value != kubelet.oom_score_adj(pod, c, capacity):
                wrong.append(f"{key}: oom_score_adj not {value}")
    expected_keys = {f"{n}/{c.name}" for n in names for c in pods[n].running_containers()}
    wrong += [f"{key}: no such running container among {ctx.params['pods']}" for key in sorted(set(given_adj) - expected_keys, key=str)]
    return _verdict(ctx, wrong, total, "QoS classes and oom_score_adj values")


# -- throttled ------------------------------------------------------------------------------------

def _best_case_ms(work_ms: float, quota_us: int, period_us: int) -> float:
    """One request of work_ms of CPU, starting with a period, under a CFS quota per period."""
    quota_ms, period_ms = quota_us / 1000, period_us / 1000
    if quota_us <= 0:
        return work_ms
    full = math.ceil(work_ms / quota_ms) - 1
    return full * period_ms + (work_ms - full * quota_ms)


def check_throttled(ctx):
    p = ctx.params
    need_milli = p["work_ms"] * 1000 // p["every_ms"]
    problems = []
    # 1. the explanation, from the Pod as it was given
    original = _pristine("node-1.yaml", p["node"])[p["pod"]]
    container = next(c for c in original.containers if c.name == p["container"])
    settings = kubelet.container_cgroup(original, container)
    try:
        data = ctx.answer()
        quota = _int(ctx.answer_field(data, "quota_us", (int, float)), "quota_us")
        period = _int(ctx.answer_field(data, "period_us", (int, float)), "period_us")
        request_ms = ctx.answer_field(data, "request_ms", (int, float))
        if quota != settings.cpu_quota:
            problems.append("quota_us is not the CFS quota kubelet gives the container's limit")
        if period != settings.cpu_period:
            problems.append("period_us is not the CFS period")
        if abs(request_ms - _best_case_ms(p["work_ms"], settings.cpu_quota, settings.cpu_period)) > 1:
            problems.append("request_ms is off: a request needing more CPU than one period's quota waits for the "
                            "next period")
    except CheckFailed as exc:
        problems.append(exc.message)
    # 2. the fix, on the live node
    node = _node(ctx, p["node"])
    try:
        record = _running(node, p["pod"])
        pod = node.pod(record)
        live = next(c for c in pod.containers if c.name == p["container"])
        request = live.requests.get("cpu")
        rel = record["containers"][p["container"]]["cgroup"]
        quota_us, period_us = node.cgroups.quota(rel)
        cpu = node.cgroups.cpu(rel)
        if not node.cgroups.pids(rel):
            problems.append(f"container {p['container']} is not running")
        if quota_us > 0 and quota_us * 1000 // period_us < need_milli:
            problems.append(f"{p['container']} is still throttled: the kernel lets it use {quota_us} us per {period_us} us "
                            f"period (its cgroup's CFS quota), less than it needs "
                            f"(nr_throttled {cpu.nr_throttled} of {cpu.nr_periods} periods)")
        if request is None or request.milli_value() < need_milli:
            problems.append(f"{p['container']}'s cpu request does not cover what it uses: under contention its "
                            "cpu.shares/cpu.weight would not get it its CPU")
        evidence = f"nr_throttled {cpu.nr_throttled} of {cpu.nr_periods} periods since it started"
    except CheckFailed as exc:
        problems.append(exc.message)
        evidence = ""
    if problems:
        return ctx.failed("; ".join(problems))
    return ctx.passed(f"explained, and {p['pod']}/{p['container']} is no longer held back by a CFS quota ({evidence})")


# -- oom ------------------------------------------------------------------------------------------

def _oom_truth(pod) -> tuple[str, str]:
    """The container whose workload needs more than its memory limit, and where it hits: its own
    limit, or (no own limit) the pod/node above it."""
    for c in pod.running_containers():
        target = _workload_target(c)
        limit = c.limits.get("memory")
        if target is not None and limit is not None and target > limit.value_int():
            return c.name, "limit"
    raise CheckFailed("the lab's scenario has no container that outgrows its limit: reinstall the lab")


def check_oom(ctx):
    p = ctx.params
    problems = []
    original = _pristine("node-1.yaml", p["node"])[p["pod"]]
    killed, cause = _oom_truth(original)
    try:
        data = ctx.answer()
        container = ctx.answer_field(data, "container", str)
        given_cause = ctx.answer_field(data, "cause", str)
        if container != killed:
            problems.append(f"container: not {container}")
        if given_cause not in ("limit", "node"):
            problems.append(f"cause: expected limit or node, got {given_cause!r}")
        elif given_cause != cause:
            problems.append(f"cause: not {given_cause} — compare where the limit was hit with where the kill counted")
    except CheckFailed as exc:
        problems.append(exc.message)
    node = _node(ctx, p["node"])
    try:
        record = _running(node, p["pod"])
        pod = node.pod(record)
        rel = record["containers"][killed]["cgroup"]
        spec = next(c for c in pod.all_containers() if c.name == killed)
        target = _workload_target(spec) or 0

        def state():
            memory = node.cgroups.memory(rel) if node.cgroups.exists(rel) else None
            running = bool(node.cgroups.pids(rel)) if memory else False
            return (running, memory.oom_kills if memory else 0,
                    bool(memory and memory.working_set >= target), memory.limit if memory else None)

        running, kills, reached, limit = state()
        if running and not kills and not reached:       # still allocating: give it a moment
            running, kills, reached, limit = settle(state, **SETTLE).value
        if limit is None:
            problems.append(f"{killed} keeps no memory limit: without one it can take the node's memory")
        if kills and record["manifest"]["spec"] == original.manifest["spec"]:
            problems.append(f"{p['pod']} is still as it was given: {killed} is OOMKilled")
        elif kills:
            problems.append(f"{killed} was OOMKilled again: its memory limit is still below what it uses")
        elif not running:
            problems.append(f"{killed} is not running")
        elif not reached:
            problems.append(f"{killed} is still allocating its memory: check again in a moment")
    except CheckFailed as exc:
        problems.append(exc.message)
    if problems:
        return ctx.failed("; ".join(problems))
    return ctx.passed(f"{killed} runs with all the memory it needs under a limit that holds it, no OOM kill")


# -- noisy-neighbour ------------------------------------------------------------------------------

def check_noisy_neighbour(ctx):
    p = ctx.params
    node = _node(ctx, p["node"])
    pristine = _pristine("node-2.yaml", p["node"])
    problems = []
    records = {}
    for name, original in pristine.items():
        record = node.record(name)
        if record is None:
            problems.append(f"Pod {name} is not on {node.name}")
            continue
        records[name] = record
        if name != p["pod"] and record["manifest"]["spec"] != original.manifest["spec"]:
            problems.append(f"{name} was changed: fix only {p['pod']}")
        if record["status"]["phase"] != "Running":
            problems.append(f"{name} is not running ({record['status'].get('reason') or record['status']['phase']})")
    if problems:
        return ctx.failed("; ".join(problems))
    cache = records[p["pod"]]
    rel = next(iter(cache["containers"].values()))["cgroup"]
    if node.cgroups.memory(rel).limit is None:
        return ctx.failed(f"{p['pod']} has no memory limit: it sizes its cache to all the memory it sees")

    def state():
        memory = node.cgroups.memory(rel)
        available, _ws = node.memory_available()
        return memory.working_set >= 0.7 * memory.limit, memory.working_set // 2 ** 20, memory.oom_kills, \
            available // 2 ** 20

    settled = True
    filled, _used, kills, available_mib = state()
    if not filled and not kills:             # still filling its cache: give it a moment
        result = settle(state, **SETTLE)
        (filled, _used, kills, available_mib), settled = result.value, result.settled
    threshold = node.config.eviction_hard_bytes() // 2 ** 20
    down = [name for name, r in records.items()
            if not any(v.pids for v in node.containers(node.record(name)))]
    if kills or down:
        return ctx.failed(f"OOMKilled or stopped on {node.name}: {', '.join(down) or p['pod']}")
    if not settled:
        return ctx.failed(f"{p['pod']} is still filling its cache: check again in a moment")
    if available_mib < threshold:
        return ctx.failed(f"{node.name}'s memory.available ({available_mib}Mi) is still below its eviction threshold "
                          f"({threshold}Mi): {p['pod']}'s limit still lets it take memory nobody reserved")
    if not filled:
        return ctx.failed(f"{p['pod']} did not fill its cache")
    return ctx.passed(f"{node.name} has {available_mib}Mi available (threshold {threshold}Mi) with all Pods running")


# -- eviction-order -------------------------------------------------------------------------------

def check_eviction_order(ctx):
    p = ctx.params
    pods = _pristine(p["file"], p["node"])
    given = [str(n) for n in ctx.answer_field(ctx.answer(), "order", list)]
    if sorted(given) != sorted(pods):
        raise CheckFailed(f"order: expected each of the {len(pods)} Pods of {p['file']} exactly once")
    ranked = _first_ranking(_node(ctx, p["node"]), set(pods))
    truth = [c["pod"] for c in ranked] if ranked else None
    if given != truth and given in _qos_orders(pods):
        return ctx.failed("that is the order of the QoS classes: kubelet's eviction manager does not rank by QoS "
                          "class (see the first hint)")
    if ranked is None:
        return ctx.failed(f"you have not watched it yet: no eviction on {p['node']} ranked these Pods. Apply "
                          f"{p['file']}, wait until they hold their memory, then `labkit resources evict --node {p['node']}`")
    if given == truth:
        return ctx.passed("the eviction manager ranked them exactly so, and evicted in that order")
    without_priority = [c["pod"] for c in sorted(ranked, key=lambda c: (not c["usage"] > c["request"],
                                                                         -(c["usage"] - c["request"])))]
    if given == without_priority:
        return ctx.failed("the order ignores priority: among the Pods above their request, the lower priority goes first")
    wrong = sum(1 for a, b in zip(given, truth) if a != b)
    return ctx.failed(f"{wrong} of {len(truth)} places differ from the eviction manager's ranking",
                      expected=f"{len(truth)} right", observed=f"{len(truth) - wrong} right")


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
    p = ctx.params
    node = _node(ctx, p["node"])
    record = _running(node, p["pod"])
    v2 = node.cgroups.version == "v2"
    key = "cpu.weight" if v2 else "cpu.shares"

    def value(rel: str) -> int:
        return node.cgroups.settings(rel)[key]

    truth = value(record["cgroup"])
    lo, hi = kubelet.weight_to_milli_range(truth) if v2 else kubelet.shares_to_milli_range(truth)
    data = ctx.answer()
    given = _int(ctx.answer_field(data, "cgroup_value", (int, float)), "cgroup_value")
    given_lo = _int(ctx.answer_field(data, "min_millicores", (int, float)), "min_millicores")
    given_hi = _int(ctx.answer_field(data, "max_millicores", (int, float)), "max_millicores")
    if given != truth:
        containers = {value(c["cgroup"]) for c in record["containers"].values() if node.cgroups.exists(c["cgroup"])}
        qos_value = value(record["cgroup"].rsplit("/", 1)[0])
        if given in containers:
            return ctx.failed(f"cgroup_value: that is a container cgroup's {key}; the pod cgroup is one level up")
        if given == qos_value:
            return ctx.failed(f"cgroup_value: that is the QoS cgroup's {key} (all its Pods together); the pod cgroup "
                              "is one level down")
        return ctx.failed(f"cgroup_value: not the {key} of {p['pod']}'s pod cgroup")
    problems = []
    if given_lo != lo:
        problems.append("min_millicores is not the smallest request giving this value")
    if given_hi != hi:
        problems.append("max_millicores is not the largest request giving this value")
    if problems:
        return ctx.failed("; ".join(problems) + " (invert each step as a range)")
    return ctx.passed(f"{key} {truth}: requests {lo}m to {hi}m give it")
