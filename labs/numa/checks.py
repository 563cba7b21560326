"""Checks of the NUMA lab.

The truth always comes from labkit's reconstruction of kubelet (labkit.numa: admission, merge,
checkpoints) run on the lab's pristine scenario files, or from the live kernel (/proc) — never from
answers stored here. A check names each wrong item and the rule it breaks (hyperthread siblings,
NUMA packing, what counts as free, ...) without giving the right answer away. `expected` says what
the check wanted, `observed` what it saw, prefixed with where: "your answer: ...", "on node-b:
...", "live: ...".
"""

import copy
import json
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


def _verdict(ctx, wrong: list[str], what: str, observed: str):
    """Pass, or fail listing each wrong item with its reason, one per line."""
    if not wrong:
        return ctx.passed(f"all {what} right")
    return ctx.failed(f"wrong {what}:\n  " + "\n  ".join(wrong), expected=f"every one of the {what} right",
                      observed=observed)


def _answered(ctx) -> str:
    return f"your answer ({ctx.answer_path})"


# -- (a) QoS -------------------------------------------------------------------------------------------


def _qos_reason(pod, answer: str, truth: str) -> str:
    """Why `answer` is not the class of `pod`, from the rules (ComputePodQOS), not from the class."""
    containers = pod.init_containers + pod.containers
    counted = [c for c in containers if any(r in ("cpu", "memory") and q.value > 0
                                            for r, q in {**c.requests, **c.limits}.items())]
    if answer == "BestEffort":
        return "a container has a cpu or memory request or limit (a limit counts as the request too)"
    if truth == "BestEffort":
        return "no container has a cpu or memory request or limit; other resources do not count"
    if answer == "Guaranteed":
        lacking = [c.name for c in containers if not all(c.limits.get(r) and c.limits[r].value > 0 for r in ("cpu", "memory"))]
        if lacking:
            return f"container {lacking[0]} has no cpu or no memory limit (init containers count too)"
        return "a request differs from its limit"
    return (f"every container ({len(containers)}, init containers too) has cpu and memory limits and its requests "
            "equal them (the API server turns a limit without a request into the request)" if counted else "")


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
            wrong.append(f"{pod.name}: not {answer}: {_qos_reason(pod, answer, qos_class(pod))}")
    extra = sorted(set(given) - {p.name for p in pods}, key=str)
    wrong += [f"{name}: no such Pod in the file" for name in extra]
    return _verdict(ctx, wrong, "QoS classes", f"{_answered(ctx)}: " + ", ".join(f"{k}: {v}" for k, v in given.items()))


# -- (b) CPU hints ---------------------------------------------------------------------------------------


def check_cpu_hints(ctx):
    given = ctx.answer_field(ctx.answer(), "hints", list)
    answer = {}
    for i, hint in enumerate(given):
        if not isinstance(hint, dict) or "mask" not in hint or "preferred" not in hint:
            raise CheckFailed(f"hints[{i}]: expected {{mask: [node ids], preferred: true|false}}, got {hint!r}")
        mask = _mask(hint["mask"], f"hints[{i}].mask")
        answer[tuple(mask or ())] = _bool(hint["preferred"], f"hints[{i}].preferred")
    _, results = _admit(ctx.params["machine"], SCENARIOS / "kubelet-config.yaml",
                        [Path(ctx.params["running"]).name, Path(ctx.params["pod"]).name])
    question = results[-1]
    request = question.pod.containers[0].requests["cpu"].value_int()
    truth = {tuple(bitmask.get_bits(h.mask)): h.preferred for h in question.containers[0].hints.get("cpu") or []}
    wrong = []
    for mask, preferred in sorted(answer.items()):
        shown = list(mask)
        if mask not in truth:
            wrong.append(f"{shown}: not a hint: NUMA node(s) {shown} do not have {request} free CPUs (the reserved CPU "
                         "and CPUs held exclusively by running containers are not free)")
        elif truth[mask] != preferred:
            wrong.append(f"{shown}: the preferred flag is wrong: preferred means no mask with fewer NUMA nodes could "
                         f"hold {request} CPUs by capacity, counting every CPU, free or not")
    if set(truth) - set(answer):
        wrong.append("a hint is missing: every set of NUMA nodes whose free CPUs can hold the request is a hint")
    if not wrong:
        return ctx.passed(f"the CPU Manager gives {question.pod.name} exactly these {len(truth)} hint(s)")
    return ctx.failed(f"the CPU Manager's hints for {question.pod.name} differ:\n  " + "\n  ".join(wrong),
                      expected="every hint the CPU Manager gives, each with its preferred flag",
                      observed=f"{_answered(ctx)}: " + ", ".join(f"{list(m)} {'preferred' if p else 'not preferred'}"
                                                              for m, p in sorted(answer.items())))


# -- (c) merge --------------------------------------------------------------------------------------------


def _merge(path: Path, policy_name: str):
    from labkit.numa.merge import NUMAInfo, Policy, hints_from_json

    data = json.loads(path.read_text())
    info = NUMAInfo(data["numaNodes"])
    result = Policy(policy_name, info).merge(hints_from_json(data["providers"]))
    mask = None if result.hint.mask is None else bitmask.get_bits(result.hint.mask)
    return mask, result.hint.preferred, result.admit


MERGE_RULES = {
    "mask": "the best merged hint wins: preferred before not preferred, then the narrowest; among non-preferred "
            "ones kubelet favours a mask as wide as the most demanding provider needs, and single-numa-node first "
            "drops every hint that is not preferred or spans several NUMA nodes",
    "preferred": "a merged hint is preferred only if every hint in it is preferred and all their masks are equal",
    "admit": "best-effort admits every Pod; restricted and single-numa-node only a preferred best hint",
}


def _decision(entry) -> str:
    if not isinstance(entry, dict):
        return repr(entry)
    yes = lambda v: "yes" if v is True else "no" if v is False else repr(v)
    return f"mask {entry.get('mask')}, preferred {yes(entry.get('preferred'))}, admit {yes(entry.get('admit'))}"


def check_merge(ctx):
    data = ctx.answer()
    wrong, broken = [], []
    for container in ("trainer", "feeder"):
        per_policy = ctx.answer_field(data, container, dict)
        for policy in MERGE_POLICIES:
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
                broken += [p for p in problems if p not in broken]
    wrong += [f"rule for {p}: {MERGE_RULES[p]}" for p in ("mask", "preferred", "admit") if p in broken]
    shown = "; ".join(f"{c}.{p}: {_decision(e)}" for c in ("trainer", "feeder") for p, e in (data.get(c) or {}).items())
    return _verdict(ctx, wrong, "policy decisions", f"{_answered(ctx)}: {shown}")


# -- (d) a Pod for best-effort but not single-numa-node --------------------------------------------------


def check_single_numa(ctx):
    from labkit.numa.pods import pod_from_dict

    manifest = ctx.answer()
    try:
        pod = pod_from_dict(manifest, ctx.answer_path)
    except LabkitError as exc:
        raise CheckFailed(f"your answer is not a Pod the API server creates: {exc}") from None
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
        return ctx.failed(f"best-effort rejects Pod {pod.name}: {best.result.message}", expected=expected,
                          observed=f"kubelet with your Pod: {observed}")
    if single.admitted:
        return ctx.failed(f"single-numa-node admits Pod {pod.name} ({best.qos}) too", expected=expected,
                          observed=f"kubelet with your Pod: {observed}")
    return ctx.failed(f"single-numa-node rejects it, but not for topology: {single.result.message}",
                      expected=expected, observed=f"kubelet with your Pod: {observed}")


# -- (e) static CPUs --------------------------------------------------------------------------------------


def _cpu_reason(topo, reserved, entry, cpus, hint_nodes, taken_in_answer) -> str:
    """Why an exclusive CPU set from the answer is not the one kubelet picks: the first rule it breaks."""
    want = len(entry.cpus)
    if len(cpus) != want:
        return f"{len(cpus)} CPU(s), but the container asks for {want}"
    if cpus & reserved:
        return f"CPU {format_cpus(cpus & reserved)} is reserved: never handed out exclusively"
    for other, theirs in taken_in_answer.items():
        if cpus & theirs:
            return f"CPU {format_cpus(cpus & theirs)} is already {other}'s in your answer"
    truth_nodes = {topo.details[c].numa for c in entry.cpus}
    if hint_nodes is not None and truth_nodes <= hint_nodes and {topo.details[c].numa for c in cpus} - hint_nodes:
        return "NUMA packing: CPUs come first from the NUMA node(s) of the container's topology hint"
    whole = lambda s: sum(1 for core in {topo.details[c].core for c in s} if topo.cpus_in_cores(core) <= s)
    if whole(cpus) < whole(entry.cpus):
        return "hyperthread siblings: takeByTopology takes whole free cores (all their threads) before single CPUs"
    return ("packing: among free units, cores and NUMA nodes already partly in use come first (a single CPU comes "
            "from a core whose other thread is taken), lower ids first")


def check_static_cpus(ctx):
    data = ctx.answer()
    given = ctx.answer_field(data, "cpus", dict)
    node, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                           [Path(ctx.params["pods"]).name])
    topo, reserved = node.topology, node.reserved_cpus()
    wrong, taken_in_answer = [], {}
    for result in results:
        for entry in result.containers:
            key = f"{result.pod.name}/{entry.name}"
            if key not in given:
                wrong.append(f"{key}: missing")
                continue
            container = next(c for c in result.pod.all_containers() if c.name == entry.name)
            request = container.requests.get("cpu")
            if str(given[key]).strip().lower() == "shared":
                if entry.exclusive:
                    wrong.append(f"{key}: gets exclusive CPUs: its Pod is Guaranteed and it asks for a whole number of CPUs")
                continue
            cpus = _cpus(given[key], f"cpus.{key}")
            if not entry.exclusive:
                why = (f"its Pod is {result.qos}" if result.qos != "Guaranteed"
                       else f"its CPU request {request} is not a whole number")
                wrong.append(f"{key}: stays in the shared pool: {why}")
            elif cpus != entry.cpus:
                hint = entry.best_hint
                hint_nodes = None if hint is None or hint.mask is None else set(bitmask.get_bits(hint.mask))
                wrong.append(f"{key}: {_cpu_reason(topo, reserved, entry, cpus, hint_nodes, taken_in_answer)}")
            taken_in_answer[key] = cpus
    pool = _cpus(ctx.answer_field(data, "defaultCpuSet", (str, int, list)), "defaultCpuSet")
    if pool != node.shared_pool():
        mine = frozenset().union(*taken_in_answer.values()) if taken_in_answer else frozenset()
        if reserved - pool:
            wrong.append("defaultCpuSet: the reserved CPU stays in the shared pool")
        elif pool & mine:
            wrong.append(f"defaultCpuSet: CPU {format_cpus(pool & mine)} is given exclusively in your own answer")
        else:
            wrong.append("defaultCpuSet: not the CPUs left after every exclusive assignment")
    return _verdict(ctx, wrong, "CPU sets", f"{_answered(ctx)}: " + ", ".join(f"{k}: {v}" for k, v in given.items())
                    + f"; defaultCpuSet: {data.get('defaultCpuSet')}")


# -- (f) Memory Manager -------------------------------------------------------------------------------------


def check_memory(ctx):
    data = ctx.answer()
    admitted = ctx.answer_field(data, "admitted", dict)
    memory = ctx.answer_field(data, "memory", dict)
    node, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                           [Path(ctx.params["pods"]).name])
    allocatable = {n: t["memory"][0] for n, t in node.memory_tables().items()}
    wrong = []
    for result in results:
        name = result.pod.name
        if name not in admitted:
            wrong.append(f"{name}: admission missing")
            continue
        if _bool(admitted[name], f"admitted.{name}") != result.admitted:
            wrong.append(f"{name}: {'admitted' if admitted[name] else 'rejected'} is wrong: a container that fits on no "
                         "single NUMA node needs a group of nodes, a node serving a single-node allocation cannot join "
                         "a group, and a group is only ever used whole")
            continue
        if not result.admitted:
            continue
        for entry in result.containers:
            key = f"{name}/{entry.name}"
            if key not in memory:
                wrong.append(f"{key}: memory nodes missing")
                continue
            nodes = _mask(memory[key], f"memory.{key}")
            if nodes == sorted(entry.memory_nodes or []):
                continue
            size = result.pod.containers[0].requests["memory"].value_int()
            if nodes and sum(allocatable.get(n, 0) for n in nodes) < size:
                why = "those nodes cannot hold it (allocatable = memory - reservedMemory - hugepages)"
            elif len(nodes or []) > len(entry.memory_nodes or []):
                why = "fewer NUMA nodes can hold it: the narrowest hint wins"
            else:
                why = ("not where the Memory Manager puts it: where it has the free memory, narrowest hint first, "
                       "then the lowest node")
            wrong.append(f"{key}: memory on {nodes}: {why}")
    shown = ", ".join(f"{k}: {'admitted' if v is True else 'rejected' if v is False else v}" for k, v in admitted.items())
    shown += "; memory " + ", ".join(f"{k}: {v}" for k, v in memory.items())
    return _verdict(ctx, wrong, "answers", f"{_answered(ctx)}: {shown}")


# -- (g) the corrupted checkpoint -----------------------------------------------------------------------------


def _bound_pods(path: Path) -> list:
    """The Pods still bound to the node: none when the file is gone or holds no document (drained)."""
    from labkit.numa.pods import load_pods

    if not path.exists():
        return []
    try:
        return load_pods(path, allow_empty=True)
    except LabkitError as exc:
        raise CheckFailed(f"{path} cannot be read: {exc}") from None


def check_checkpoint(ctx):
    from labkit.numa.admission import KubeletStartError
    from labkit.numa.pods import load_pods

    lab_dir = f"{ctx.env.dir}/"
    name = ctx.params["node"]
    node_dir = ctx.env.dir / name
    state = node_dir / "kubelet"
    pods = _bound_pods(node_dir / "pods.yaml")
    try:   # the checkpoints are read, never written: nothing here changes node-b
        node = _node(str(node_dir / "machine.json"), node_dir / "kubelet-config.yaml", state)
    except KubeletStartError as exc:
        return ctx.failed(f"{name}'s kubelet still does not start: {str(exc).replace(lab_dir, '')}",
                          expected="kubelet starts", observed=f"on {name}: kubelet refuses to start")
    originally = {pod.uid: pod for pod in load_pods(HERE / "scenarios" / "node-b-pods.yaml")}
    kept = sorted(f"{originally[uid].namespace}/{originally[uid].name}" for uid in node.cpu_state.assignments
                  if uid in originally)
    lost = []
    for pod in pods:
        for container in pod.all_containers():
            wants = node.cpu_policy.guaranteed_cpus(pod, container)
            if wants and node.cpu_state.get_cpu_set(pod.uid, container.name) is None:
                lost.append(f"{pod.namespace}/{pod.name}/{container.name}")
    if lost:
        return ctx.failed(
            f"the kubelet starts, but Pods still bound to {name} lost their exclusive CPUs ({', '.join(lost)}): "
            f"they would now share CPUs with the next Pods. The node must be drained before the checkpoint is deleted.",
            expected=f"no Pod on {name} without its exclusive CPUs", observed=f"on {name}: {len(pods)} Pod(s) still bound")
    if kept:
        return ctx.failed(
            f"{name}/kubelet/cpu_manager_state was edited by hand again: it still holds the CPUs of {', '.join(kept)}, "
            "which ran before. The documented way is to drain the node, delete the file and start the kubelet, "
            "which writes a fresh one.", expected="a checkpoint the kubelet wrote afresh (or none)",
            observed=f"on {name}: assignments of the Pods that ran before")
    node.remove_stale_state({pod.uid for pod in pods} | {p.uid for p in load_pods(node_dir / "probe-pod.yaml")})
    (probe,) = node.admit_all(load_pods(node_dir / "probe-pod.yaml"))
    if not probe.admitted:
        return ctx.failed(f"the kubelet starts but rejects the probe Pod: {probe.result.message}",
                          expected="the probe Pod admitted", observed=f"on {name}: {probe.result.reason}")
    return ctx.passed(f"{name}'s kubelet starts ({len(pods)} Pod(s) still bound) and admits the probe Pod "
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
            raise CheckFailed(f"{role}: no running Pod {name!r} on the live node (running: {running})",
                              observed=f"live: Pods {running}")
        pod_views = by_pod[name]
        if pod_views[0].pod.qos != qos:
            raise CheckFailed(f"{role}: Pod {name} is {pod_views[0].pod.qos}, not {qos}", expected=qos,
                              observed=f"live: Pod {name} is {pod_views[0].pod.qos}")
        view = next((v for v in pod_views if pid in v.pids), None)
        if view is None:
            raise CheckFailed(f"{role}: process {pid!r} is not a container process of Pod {name}: `labkit numa show` "
                              "lists them", observed=f"your answer: pid {pid}")
        live = runtime.proc_affinity(pid)
        if live is None:
            raise CheckFailed(f"{role}: process {pid} is gone")
        if _cpus(listed, f"{role}.cpus_allowed_list") != frozenset(live.cpus):
            raise CheckFailed(f"{role}: {listed!r} is not what /proc/{pid}/status says in Cpus_allowed_list: read it "
                              "there", expected="Cpus_allowed_list as the kernel reports it",
                              observed=f"your answer: {listed}")
        observed[role] = (view, frozenset(live.cpus))
    g_view, g_cpus = observed["guaranteed"]
    b_view, b_cpus = observed["burstable"]
    if not g_view.exclusive:
        raise CheckFailed(f"container {g_view.label} has no exclusive CPUs: ask for a whole number of CPUs "
                          "with requests equal to limits", expected="exclusive CPUs",
                          observed=f"live: {g_view.label} in the shared pool")
    if g_cpus != g_view.want_cpus:
        raise CheckFailed(f"{g_view.label} runs on {format_cpus(g_cpus)}, not on its exclusive CPUs "
                          f"{format_cpus(g_view.want_cpus)}", observed=f"live: Cpus_allowed_list {format_cpus(g_cpus)}")
    sharing = [v.label for v in views if v is not g_view and v.proc and set(v.proc.cpus) & g_cpus]
    if sharing:
        raise CheckFailed(f"CPU(s) {format_cpus(g_cpus)} of {g_view.label} are also allowed to {', '.join(sharing)}",
                          observed=f"live: {', '.join(sharing)} may run there")
    if b_cpus != shared_pool:
        raise CheckFailed(f"{b_view.label} runs on {format_cpus(b_cpus)}, not on the shared pool {format_cpus(shared_pool)}",
                          observed=f"live: Cpus_allowed_list {format_cpus(b_cpus)}")
    return ctx.passed(f"{g_view.label} has CPU(s) {format_cpus(g_cpus)} to itself among the Pods' containers (system "
                      f"processes may still run there); {b_view.label} on the shared pool {format_cpus(b_cpus)} "
                      "(read from /proc)")
