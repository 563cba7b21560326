"""Checks of the NUMA lab.

The truth always comes from labkit's reconstruction of kubelet (labkit.numa: admission, merge,
checkpoints) run on the lab's pristine scenario files, or from the live kernel (/proc) — never from
answers stored here. A check says which items are wrong without giving the right answer away.
"""

import copy
import json
import shutil
import tempfile
from pathlib import Path

import yaml

from labkit.errors import LabkitError
from labkit.exercises import CheckFailed
from labkit.numa import bitmask, runtime
from labkit.numa.cpuset import CPUSetParseError, format_cpus, parse

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
MERGE_POLICIES = ("best-effort", "restricted", "single-numa-node")


# -- the reconstruction, driven from the scenario files ----------------------------------------------


def _node(machine: str, config: Path | dict, state_dir=None):
    from labkit.numa.admission import Node
    from labkit.numa.config import config_from_dict, load_config
    from labkit.numa.machine import load_machine

    cfg = config_from_dict(config, "<config>") if isinstance(config, dict) else load_config(config)
    return Node(load_machine(machine), cfg, state_dir)


def _pods(name: str):
    from labkit.numa.pods import load_pods
    return load_pods(SCENARIOS / name)


def _admit(machine: str, config, pod_files: list[str]):
    node = _node(machine, config)
    results = []
    for name in pod_files:
        results += node.admit_all(_pods(name))
    return node, results


# -- answer parsing -----------------------------------------------------------------------------------


def _mask(value, where: str):
    """An answer's NUMA mask: a list of node ids (or one id), or null; returned sorted."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return sorted(set(value))
    raise CheckFailed(f"{where}: expected a list of NUMA node ids (e.g. [0, 1]) or null, got {value!r}")


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise CheckFailed(f"{where}: expected true or false, got {value!r}")
    return value


def _cpus(value, where: str):
    if isinstance(value, int) and not isinstance(value, bool):
        return frozenset([value])
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return frozenset(value)
    try:
        return parse(str(value).replace(" ", ""))
    except CPUSetParseError:
        raise CheckFailed(f"{where}: {value!r} is not a CPU list like \"2,8\" or \"1-3\"") from None


def _verdict(ctx, wrong: list[str], total: int, what: str):
    if not wrong:
        return ctx.passed(f"all {total} {what} right")
    return ctx.failed(f"{len(wrong)} of {total} {what} wrong: " + "; ".join(wrong),
                      expected=f"{total} right", observed=f"{total - len(wrong)} right")


# -- (a) QoS -------------------------------------------------------------------------------------------


def check_qos(ctx):
    from labkit.numa.pods import qos_class

    given = ctx.answer_field(ctx.answer(), "qos", dict)
    pods = _pods(Path(ctx.params["file"]).name)
    wrong = []
    for pod in pods:
        answer = given.get(pod.name)
        if answer is None:
            wrong.append(f"{pod.name}: missing")
        elif answer not in QOS_CLASSES:
            wrong.append(f"{pod.name}: {answer!r} is not one of {', '.join(QOS_CLASSES)}")
        elif answer != qos_class(pod):
            wrong.append(f"{pod.name}: not {answer}")
    extra = sorted(set(given) - {p.name for p in pods}, key=str)
    wrong += [f"{name}: no such Pod in the file" for name in extra]
    return _verdict(ctx, wrong, len(pods), "QoS classes")


# -- (b) CPU hints ---------------------------------------------------------------------------------------


def check_cpu_hints(ctx):
    given = ctx.answer_field(ctx.answer(), "hints", list)
    answer = set()
    for i, hint in enumerate(given):
        if not isinstance(hint, dict) or "mask" not in hint or "preferred" not in hint:
            raise CheckFailed(f"hints[{i}]: expected {{mask: [node ids], preferred: true|false}}, got {hint!r}")
        mask = _mask(hint["mask"], f"hints[{i}].mask")
        answer.add((tuple(mask or ()), _bool(hint["preferred"], f"hints[{i}].preferred")))
    _, results = _admit(ctx.params["machine"], SCENARIOS / "kubelet-config.yaml",
                        [Path(ctx.params["running"]).name, Path(ctx.params["pod"]).name])
    question = results[-1]
    cpu_hints = question.containers[0].hints.get("cpu") or []
    truth = {(tuple(bitmask.get_bits(h.mask)), h.preferred) for h in cpu_hints}
    if answer == truth:
        return ctx.passed(f"the CPU Manager gives {question.pod.name} exactly these {len(truth)} hint(s)")
    truth_masks = {m for m, _p in truth}
    flag_wrong = [m for m, _p in answer - truth if m in truth_masks]
    not_hints = [m for m, _p in answer - truth if m not in truth_masks]
    missing = len(truth_masks - {m for m, _p in answer})
    detail = []
    if flag_wrong:
        detail.append(f"{len(flag_wrong)} hint(s) with the wrong preferred flag")
    if not_hints:
        detail.append(f"{len(not_hints)} mask(s) the CPU Manager does not offer")
    if missing:
        detail.append(f"{missing} hint(s) missing")
    return ctx.failed("; ".join(detail), expected=f"{len(truth)} hint(s)", observed=f"{len(answer)} hint(s)")


# -- (c) merge --------------------------------------------------------------------------------------------


def _merge(path: Path, policy_name: str):
    from labkit.numa.merge import NUMAInfo, Policy, hints_from_json

    data = json.loads(path.read_text())
    info = NUMAInfo(data["numaNodes"])
    result = Policy(policy_name, info).merge(hints_from_json(data["providers"]))
    mask = None if result.hint.mask is None else bitmask.get_bits(result.hint.mask)
    return mask, result.hint.preferred, result.admit


def check_merge(ctx):
    data = ctx.answer()
    wrong, total = [], 0
    for container in ("trainer", "feeder"):
        per_policy = ctx.answer_field(data, container, dict)
        for policy in MERGE_POLICIES:
            total += 1
            where = f"{container}.{policy}"
            entry = per_policy.get(policy)
            if not isinstance(entry, dict) or not {"mask", "preferred", "admit"} <= set(entry):
                wrong.append(f"{where}: expected {{mask, preferred, admit}}")
                continue
            mask, preferred, admit = _merge(SCENARIOS / Path(ctx.params[container]).name, policy)
            problems = []
            if _mask(entry["mask"], f"{where}.mask") != mask:
                problems.append("mask")
            if _bool(entry["preferred"], f"{where}.preferred") != preferred:
                problems.append("preferred")
            if _bool(entry["admit"], f"{where}.admit") != admit:
                problems.append("admit")
            if problems:
                wrong.append(f"{where}: wrong {', '.join(problems)}")
    return _verdict(ctx, wrong, total, "policy decisions")


# -- (d) a Pod for best-effort but not single-numa-node --------------------------------------------------


def check_single_numa(ctx):
    from labkit.numa.pods import pod_from_dict

    manifest = ctx.answer()
    try:
        pod = pod_from_dict(manifest, ctx.answer_path)
    except LabkitError as exc:
        raise CheckFailed(f"your answer is not a Pod labkit can read: {exc}") from None
    config = yaml.safe_load((SCENARIOS / "kubelet-config.yaml").read_text())
    outcome = {}
    for policy in ("best-effort", "single-numa-node"):
        variant = copy.deepcopy(config)
        variant["topologyManagerPolicy"] = policy
        (result,) = _node(ctx.params["machine"], variant).admit_all([pod])
        outcome[policy] = result
    best, single = outcome["best-effort"], outcome["single-numa-node"]
    observed = (f"best-effort: {'admitted' if best.admitted else 'rejected (' + best.result.reason + ')'}; "
                f"single-numa-node: {'admitted' if single.admitted else 'rejected (' + single.result.reason + ')'}")
    expected = "best-effort: admitted; single-numa-node: rejected (TopologyAffinityError)"
    if best.admitted and not single.admitted and single.result.reason == "TopologyAffinityError":
        return ctx.passed(f"Pod {pod.name} ({best.qos}): {observed}")
    if not best.admitted:
        return ctx.failed(f"best-effort rejects Pod {pod.name}: {best.result.message}", expected=expected, observed=observed)
    if single.admitted:
        return ctx.failed(f"single-numa-node admits Pod {pod.name} ({best.qos}) too", expected=expected, observed=observed)
    return ctx.failed(f"single-numa-node rejects it, but not for topology: {single.result.message}",
                      expected=expected, observed=observed)


# -- (e) static CPUs --------------------------------------------------------------------------------------


def check_static_cpus(ctx):
    data = ctx.answer()
    given = ctx.answer_field(data, "cpus", dict)
    node, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                           [Path(ctx.params["pods"]).name])
    wrong, total = [], 0
    for result in results:
        for entry in result.containers:
            total += 1
            key = f"{result.pod.name}/{entry.name}"
            if key not in given:
                wrong.append(f"{key}: missing")
                continue
            if str(given[key]).strip().lower() == "shared":
                if entry.exclusive:
                    wrong.append(f"{key}: not in the shared pool")
            elif not entry.exclusive:
                wrong.append(f"{key}: gets no exclusive CPUs")
            elif _cpus(given[key], f"cpus.{key}") != entry.cpus:
                wrong.append(f"{key}: not {given[key]}")
    total += 1
    pool = ctx.answer_field(data, "defaultCpuSet", (str, int, list))
    if _cpus(pool, "defaultCpuSet") != node.shared_pool():
        wrong.append(f"defaultCpuSet: not {pool}")
    return _verdict(ctx, wrong, total, "CPU sets")


# -- (f) Memory Manager -------------------------------------------------------------------------------------


def check_memory(ctx):
    data = ctx.answer()
    admitted = ctx.answer_field(data, "admitted", dict)
    memory = ctx.answer_field(data, "memory", dict)
    _, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                             [Path(ctx.params["pods"]).name])
    wrong, total = [], 0
    for result in results:
        total += 1
        name = result.pod.name
        if name not in admitted:
            wrong.append(f"{name}: admission missing")
            continue
        if _bool(admitted[name], f"admitted.{name}") != result.admitted:
            wrong.append(f"{name}: not {'admitted' if admitted[name] else 'rejected'}")
            continue
        if not result.admitted:
            continue
        for entry in result.containers:
            total += 1
            key = f"{name}/{entry.name}"
            if key not in memory:
                wrong.append(f"{key}: memory nodes missing")
            elif _mask(memory[key], f"memory.{key}") != sorted(entry.memory_nodes or []):
                wrong.append(f"{key}: memory not on {memory[key]}")
    return _verdict(ctx, wrong, total, "answers")


# -- (g) the corrupted checkpoint -----------------------------------------------------------------------------


def _bound_pods(path: Path) -> list:
    """The Pods still bound to the node: none when the file is gone or holds no document (drained)."""
    from labkit.numa.pods import load_pods

    if not path.exists():
        return []
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise CheckFailed(f"{path} is not valid YAML: {exc}") from None
    return load_pods(path) if documents else []


def check_checkpoint(ctx):
    from labkit.numa.admission import KubeletStartError
    from labkit.numa.pods import load_pods

    node_dir = ctx.env.dir / ctx.params["node"]
    pods = _bound_pods(node_dir / "pods.yaml")
    with tempfile.TemporaryDirectory() as scratch:   # kubelet writes its checkpoints: work on a copy
        state = Path(scratch) / "kubelet"
        shutil.copytree(node_dir / "kubelet", state)
        try:
            node = _node(str(node_dir / "machine.json"), node_dir / "kubelet-config.yaml", state)
        except KubeletStartError as exc:
            return ctx.failed(f"node-b's kubelet still does not start: {exc}",
                              expected="kubelet starts", observed="kubelet refuses to start")
        active = {pod.uid for pod in pods}
        for uid in set(node.cpu_state.assignments) | set(node.memory_state.assignments):
            if uid not in active:
                node.remove_pod(uid)   # removeStaleState before the next admission
        lost = []
        for pod in pods:
            for container in pod.all_containers():
                wants = node.cpu_policy.guaranteed_cpus(pod, container)
                if wants and node.cpu_state.get_cpu_set(pod.uid, container.name) is None:
                    lost.append(f"{pod.namespace}/{pod.name}/{container.name}")
        if lost:
            return ctx.failed(
                "the kubelet starts, but Pods still bound to node-b lost their exclusive CPUs "
                f"({', '.join(lost)}): they would now share CPUs with the next Pods. The node must be "
                "drained before the checkpoint is deleted.",
                expected="no Pod on node-b without its exclusive CPUs", observed=f"{len(lost)} container(s)")
        (probe,) = node.admit_all(load_pods(node_dir / "probe-pod.yaml"))
    if not probe.admitted:
        return ctx.failed(f"the kubelet starts but rejects the probe Pod: {probe.result.message}")
    return ctx.passed(f"node-b's kubelet starts ({len(pods)} Pod(s) still bound) and admits the probe Pod "
                      f"on CPUs {format_cpus(probe.containers[0].cpus)}")


# -- (h) real pinning ----------------------------------------------------------------------------------------


def _live_views(ctx):
    from labkit.numa.livenode import LiveNode
    live = LiveNode(ctx.env)
    node = live.kubelet()
    return node, [v for v in live.views(node) if v.pids]


def check_pin(ctx):
    data = ctx.answer()
    node, views = _live_views(ctx)
    shared_pool = node.shared_pool()
    by_pod: dict[str, list] = {}
    for view in views:
        by_pod.setdefault(view.pod.name, []).append(view)
    observed = {}
    for role, qos in (("guaranteed", "Guaranteed"), ("burstable", "Burstable")):
        entry = ctx.answer_field(data, role, dict)
        name, pid, listed = entry.get("pod"), entry.get("pid"), entry.get("cpus_allowed_list")
        if not isinstance(name, str):
            raise CheckFailed(f"{ctx.answer_path}: {role}.pod should be a Pod's name, got {name!r}")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise CheckFailed(f"{ctx.answer_path}: {role}.pid should be a process id (a number), got {pid!r}")
        if name not in by_pod:
            running = ", ".join(sorted(by_pod)) or "none"
            raise CheckFailed(f"{role}: no running Pod {name!r} on the live node (running: {running})")
        pod_views = by_pod[name]
        if pod_views[0].pod.qos != qos:
            raise CheckFailed(f"{role}: Pod {name} is {pod_views[0].pod.qos}, not {qos}")
        view = next((v for v in pod_views if pid in v.pids), None)
        if view is None:
            raise CheckFailed(f"{role}: process {pid!r} is not a container process of Pod {name} "
                              f"(its processes: {sorted(p for v in pod_views for p in v.pids)})")
        live = runtime.proc_affinity(pid)
        if live is None:
            raise CheckFailed(f"{role}: process {pid} is gone")
        if _cpus(listed, f"{role}.cpus_allowed_list") != frozenset(live.cpus):
            raise CheckFailed(f"{role}: /proc/{pid}/status says Cpus_allowed_list {format_cpus(live.cpus)}, "
                              f"not {listed}", expected=format_cpus(live.cpus), observed=listed)
        observed[role] = (view, frozenset(live.cpus))
    g_view, g_cpus = observed["guaranteed"]
    b_view, b_cpus = observed["burstable"]
    if not g_view.exclusive:
        raise CheckFailed(f"container {g_view.label} has no exclusive CPUs: ask for a whole number of CPUs "
                          "with requests equal to limits")
    if g_cpus != g_view.want_cpus:
        raise CheckFailed(f"{g_view.label} runs on {format_cpus(g_cpus)}, not on its exclusive CPUs "
                          f"{format_cpus(g_view.want_cpus)}")
    sharing = [v.label for v in views if v is not g_view and v.proc and set(v.proc.cpus) & g_cpus]
    if sharing:
        raise CheckFailed(f"CPU(s) {format_cpus(g_cpus)} of {g_view.label} are also allowed to {', '.join(sharing)}")
    if b_cpus != shared_pool:
        raise CheckFailed(f"{b_view.label} runs on {format_cpus(b_cpus)}, not on the shared pool {format_cpus(shared_pool)}")
    return ctx.passed(f"{g_view.label} alone on CPU(s) {format_cpus(g_cpus)}; {b_view.label} on the shared pool "
                      f"{format_cpus(b_cpus)} (read from /proc)")
