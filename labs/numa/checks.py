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
import re
from pathlib import Path

import yaml

from labkit.errors import LabkitError
from labkit.exercises import LIVE, AnswerMalformed, CheckFailed
from labkit.numa import bitmask, runtime
from labkit.numa.cpuset import CPUSetParseError, format_cpus, parse

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")
MERGE_POLICIES = ("best-effort", "restricted", "single-numa-node")
LAB_PODS = {("kube-system", "node-agent")}     # the live node's own Pods (scenarios/node-agent.yaml)


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


def _shown(value) -> str:
    """A value of an answer as YAML writes it, not as Python does (`true`, `null`, `{mask: [0]}`,
    not True, None, {'mask': [0]})."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20).strip()
    return text[:-len("...")].strip() if text.endswith("...") else text


def _mask(value, where: str):
    """An answer's NUMA mask: a list of node ids (or one id), or null; returned sorted."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return sorted(set(value))
    raise AnswerMalformed(f"{where}: expected a list of NUMA node ids (the mask) or null, got {_shown(value)}")


def _bool(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise AnswerMalformed(f"{where}: expected true or false, got {_shown(value)}")
    return value


def _cpus(value, where: str):
    if isinstance(value, int) and not isinstance(value, bool):
        return frozenset([value])
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return frozenset(value)
    try:
        # blanks around "," and "-" are layout ("2, 8"); one between digits ("2 8") is no list
        return parse(re.sub(r"\s*([,-])\s*", r"\1", str(value).strip()))
    except CPUSetParseError:
        raise AnswerMalformed(f"{where}: {_shown(value)} is not a CPU list in Linux list form (ids and ranges such as \"a,b\" or \"a-c\")") from None


def _verdict(ctx, wrong: list[str], what: str, observed: str):
    """Pass, or fail listing each wrong item with its reason, one per line."""
    if not wrong:
        return ctx.passed(f"all {what} right")
    return ctx.failed(f"wrong {what}:\n  " + "\n  ".join(wrong), expected=f"every one of the {what} right",
                      observed=observed)


def _answer(ctx):
    """The answer file, parsed, refusing a key given twice in one mapping (YAML keeps only the last
    one, so the student's other value would silently not count)."""
    from labkit.strict import key_positions

    data = ctx.answer()
    try:
        text = ctx.answer_path.read_text()
    except OSError:
        return data
    for positions in key_positions(text)[:1]:
        if positions.duplicates:
            line, path = positions.duplicates[0]
            raise AnswerMalformed(f"it gives {path} twice (line {line + 1}): YAML keeps only the last one; "
                                  f"write each key once\n  {ctx.answer_path}")
    return data


def _answered(ctx) -> str:
    return f"your answer ({ctx.answer_path})"


# -- the situation the prediction exercises describe ------------------------------------------------


def _situation(ctx, *files: str) -> str:
    """A note when the student changed the lab's copy of a scenario file: predictions are graded
    against the lab as built (the pristine scenarios), not against the edited copy."""
    changed = []
    for name in files:
        copy_in_lab = ctx.env.dir / "scenarios" / Path(name).name
        try:
            if copy_in_lab.read_bytes() != (SCENARIOS / Path(name).name).read_bytes():
                changed.append(f"scenarios/{Path(name).name}")
        except OSError:
            changed.append(f"scenarios/{Path(name).name}")
    if not changed:
        return ""
    return (f"\n(graded against the situation the exercise describes, the lab as built: your copy of "
            f"{', '.join(changed)} differs from it or is gone, and that does not change the answer)")


def _recorded(ctx, result, note: str = ""):
    """A complete answer was checked: from now on `labkit numa admit | merge | take | show` show this
    exercise's outcome (labkit.numa.withhold), so the first prediction is the student's own."""
    from labkit.numa import withhold

    if result.status == "pass" or result.details.get("complete"):
        try:
            text = ctx.answer_path.read_text()
        except (OSError, UnicodeDecodeError):
            text = None
        withhold.record(ctx.env, ctx.exercise.id, None if note else text)
    if note:
        result.message += note
    return result


def _prediction(ctx):
    """(the answer to grade, a note): the answer as it was when a labkit tool first showed the
    exercise's outcome (labkit.predictions), else the answer file. A prediction rewritten
    after its outcome was shown is a copy of the outcome."""
    from labkit import predictions

    if predictions.kept(ctx.lab.id, ctx.exercise.id) is None:
        return _answer(ctx), ""
    data, note = predictions.graded_answer(ctx)
    return data, "\n" + note.strip()


# the predictions are about the lab's scenario files: there is nothing live to observe or change first
GRID_ADVICE = "work each one out again from kubelet's rules, not by trying values"


def _grid(ctx, wrong: list[str], total: int, what: str, where: str, note: str, shown: str):
    """Pass, or fail with ctx.grid_feedback (neither which cells are wrong nor how many; the
    different wrong answers counted) and where to look, never the value."""
    if not wrong:
        return ctx.passed(f"all {total} {what} right{note}")
    return ctx.failed(f"{ctx.grid_feedback(wrong, total, what, advice=GRID_ADVICE)}.\n{where}{note}",
                      expected=f"every one of the {total} {what} right", observed=f"{_answered(ctx)}: {shown}",
                      complete=True)


# -- (a) QoS -------------------------------------------------------------------------------------------

QOS_RULES = ("Work each Pod through kubelet's rules again (ComputePodQOS in pkg/apis/core/v1/helper/qos/qos.go): only cpu and memory "
             "count, init containers count like the others, and the API server turns a limit without a request "
             "into the request before kubelet sees the Pod; `labkit hint numa qos`.")


def judge_qos(ctx, answer):
    from labkit.numa.pods import qos_class

    given = ctx.answer_field(answer, "qos", dict)
    pods = _pods(Path(ctx.params["file"]).name)
    names = [p.name for p in pods]
    problems = []
    for pod in pods:
        value = given.get(pod.name)
        if value is None:
            problems.append(f"{pod.name}: missing")
        elif value not in QOS_CLASSES:
            problems.append(f"{pod.name}: {value!r} is not one of {', '.join(QOS_CLASSES)}")
    problems += [f"{name}: no such Pod in {ctx.params['file']}" for name in sorted(set(given) - set(names), key=str)]
    shown = ", ".join(f"{k}: {v}" for k, v in given.items())
    if problems:
        return ctx.failed("your answer needs one QoS class for each Pod of the file:\n  " + "\n  ".join(problems),
                          expected=f"one class for each of the Pods {', '.join(names)}",
                          observed=f"{_answered(ctx)}: {shown}",
                          malformed=True)     # not a wrong answer to count (run_check): nothing judged yet
    wrong = [f"the class of Pod {pod.name}" for pod in pods if given[pod.name] != qos_class(pod)]
    return _grid(ctx, wrong, len(pods), "QoS classes", QOS_RULES, _situation(ctx, ctx.params["file"]), shown)


def check_qos(ctx):
    answer, note = _prediction(ctx)
    return _recorded(ctx, judge_qos(ctx, answer), note)


# -- (b) CPU hints ---------------------------------------------------------------------------------------

HINT_RULES = ("Where to look: a mask is a hint when the free CPUs of its NUMA nodes (not reserved, not held "
              "exclusively by a running container) can hold the request; it is preferred when no mask with fewer "
              "NUMA nodes could hold the request by capacity, counting every CPU (GetTopologyHints / "
              "generateCPUTopologyHints in pkg/kubelet/cm/cpumanager/policy_static.go).")


def _hint_truth(ctx):
    _, results = _admit(ctx.params["machine"], SCENARIOS / "kubelet-config.yaml",
                        [Path(ctx.params["running"]).name, Path(ctx.params["pod"]).name])
    question = results[-1]
    truth = {tuple(bitmask.get_bits(h.mask)): h.preferred for h in question.containers[0].hints.get("cpu") or []}
    return question, truth


def judge_cpu_hints(ctx, answer):
    from itertools import combinations

    from labkit.numa.machine import load_machine
    from labkit.numa.topology import CPUTopology

    given = ctx.answer_field(answer, "hints", list)
    nodes = sorted(CPUTopology.discover(load_machine(ctx.params["machine"])).numa_nodes())
    stated: dict[tuple, bool] = {}
    for i, hint in enumerate(given):
        if not isinstance(hint, dict):
            raise AnswerMalformed(f"hints[{i}]: expected {{mask: [node ids], preferred: true|false}}, got {_shown(hint)}")
        unknown_keys = sorted(set(hint) - {"mask", "preferred"}, key=str)
        missing = [key for key in ("mask", "preferred") if key not in hint]
        if unknown_keys or missing:
            said = [f"it has no {' and no '.join(missing)}"] if missing else []
            said += [f"the key {key} is not one a hint has{' (misspelled?)' if missing else ''}" for key in unknown_keys]
            raise AnswerMalformed(f"hints[{i}]: {'; '.join(said)}: a hint is {{mask: [node ids], preferred: true|false}}")
        mask = tuple(_mask(hint["mask"], f"hints[{i}].mask") or ())
        if not mask:
            raise AnswerMalformed(f"hints[{i}].mask: a CPU hint names at least one NUMA node")
        unknown = [n for n in mask if n not in nodes]
        if unknown:
            raise AnswerMalformed(f"hints[{i}].mask: NUMA node {unknown[0]} does not exist on {ctx.params['machine']} "
                              f"(its nodes: {', '.join(map(str, nodes))})")
        if mask in stated:
            raise AnswerMalformed(f"hints[{i}]: the mask {list(mask)} is listed twice: each mask is one hint")
        stated[mask] = _bool(hint["preferred"], f"hints[{i}].preferred")
    question, truth = _hint_truth(ctx)
    masks = [m for k in range(1, len(nodes) + 1) for m in combinations(nodes, k)]
    say = lambda table, m: "no hint" if m not in table else ("preferred" if table[m] else "not preferred")
    wrong = [f"mask {list(m)}" for m in masks if say(stated, m) != say(truth, m)]
    shown = ", ".join(f"{list(m)} {'preferred' if p else 'not preferred'}" for m, p in stated.items()) or "no hints"
    return _grid(ctx, wrong, len(masks), "masks",
                 f"Each mask of {ctx.params['machine']} is a hint of {question.pod.name}'s container or not, preferred "
                 f"or not. {HINT_RULES}", _situation(ctx, ctx.params["running"], ctx.params["pod"], "kubelet-config.yaml"), shown)


def check_cpu_hints(ctx):
    answer, note = _prediction(ctx)
    return _recorded(ctx, judge_cpu_hints(ctx, answer), note)


# -- (c) merge --------------------------------------------------------------------------------------------


def _merge(path: Path, policy_name: str):
    from labkit.numa.merge import NUMAInfo, Policy, hints_from_json

    data = json.loads(path.read_text())
    info = NUMAInfo(data["numaNodes"])
    result = Policy(policy_name, info).merge(hints_from_json(data["providers"]))
    mask = None if result.hint.mask is None else bitmask.get_bits(result.hint.mask)
    return mask, result.hint.preferred, result.admit


MERGE_RULES = ("Where to look (pkg/kubelet/cm/topologymanager/policy.go, mergePermutation and "
               "HintMerger.compare): the best merged hint wins, preferred before not preferred, then the narrowest; "
               "among non-preferred ones kubelet favours a mask as wide as the most demanding provider needs; a "
               "merged hint is preferred only if every hint in it is preferred and all their masks are equal; "
               "single-numa-node first drops every hint that is not preferred or spans several NUMA nodes; "
               "best-effort admits every Pod, restricted and single-numa-node only a preferred best hint.")


def _decision(entry) -> str:
    if not isinstance(entry, dict):
        return _shown(entry)
    yes = lambda v: "yes" if v is True else "no" if v is False else _shown(v)
    return f"mask {_shown(entry.get('mask'))}, preferred {yes(entry.get('preferred'))}, admit {yes(entry.get('admit'))}"


def judge_merge(ctx, data):
    parsed, problems = {}, []
    for container in ("trainer", "feeder"):
        per_policy = ctx.answer_field(data, container, dict)
        extra = sorted(set(per_policy) - set(MERGE_POLICIES), key=str)
        problems += [f"{container}.{p}: not one of the policies {', '.join(MERGE_POLICIES)}" for p in extra]
        for policy in MERGE_POLICIES:
            where = f"{container}.{policy}"
            entry = per_policy.get(policy)
            if not isinstance(entry, dict) or not {"mask", "preferred", "admit"} <= set(entry):
                problems.append(f"{where}: expected {{mask, preferred, admit}}")
                continue
            parsed[(container, policy)] = (_mask(entry["mask"], f"{where}.mask"),
                                           _bool(entry["preferred"], f"{where}.preferred"),
                                           _bool(entry["admit"], f"{where}.admit"))
    shown = "; ".join(f"{c}.{p}: {_decision(e)}" for c in ("trainer", "feeder")
                      for p, e in (data.get(c) or {}).items()) if isinstance(data, dict) else repr(data)
    if problems:
        return ctx.failed("your answer needs mask, preferred and admit for each container and policy:\n  "
                          + "\n  ".join(problems), expected="trainer and feeder, each with best-effort, restricted "
                          "and single-numa-node", observed=f"{_answered(ctx)}: {shown}",
                          malformed=True)     # not a wrong answer to count (run_check): nothing judged yet
    wrong = []
    for container in ("trainer", "feeder"):
        path = SCENARIOS / Path(ctx.params[container]).name
        for policy in MERGE_POLICIES:
            truth = _merge(path, policy)
            for field_name, said, right in zip(("mask", "preferred", "admit"), parsed[(container, policy)], truth):
                if said != right:
                    wrong.append(f"{container} / {policy} / {field_name}")
    return _grid(ctx, wrong, 3 * len(MERGE_POLICIES) * 2, "policy decisions (mask, preferred, admit)", MERGE_RULES,
                 _situation(ctx, ctx.params["trainer"], ctx.params["feeder"]), shown)


def check_merge(ctx):
    answer, note = _prediction(ctx)
    return _recorded(ctx, judge_merge(ctx, answer), note)


# -- (d) a Pod for best-effort but not single-numa-node --------------------------------------------------


def _two_policies(machine: str, pod):
    """kubelet with the lab's configuration on an empty `machine`, once with best-effort, once with
    single-numa-node: only topologyManagerPolicy differs (pkg/kubelet/cm/topologymanager/policy_*.go)."""
    config = yaml.safe_load((SCENARIOS / "kubelet-config.yaml").read_text())
    outcome = {}
    for policy in ("best-effort", "single-numa-node"):
        variant = copy.deepcopy(config)
        variant["topologyManagerPolicy"] = policy
        (result,) = _node(machine, variant).admit_all([pod])
        outcome[policy] = result
    return outcome["best-effort"], outcome["single-numa-node"]


def _missing_images(manifest: dict) -> list[str]:
    """The containers without an image: kube-apiserver refuses such a Pod (validateContainerCommon:
    `if len(ctr.Image) == 0 { field.Required(path.Child("image"), "") }`), which labkit.pods does not check."""
    spec = manifest.get("spec") if isinstance(manifest.get("spec"), dict) else {}
    out = []
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            if isinstance(container, dict) and not container.get("image"):
                out.append(f"spec.{kind}[{i}].image")
    return out


NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")


def _node_lacks(machine: str, pod) -> str | None:
    """kubelet's predicate admission (pkg/kubelet/lifecycle/predicate.go, Admit: noderesources fit,
    after the resource managers' own admission) rejects a Pod asking for an extended resource the node
    has fewer of than it asks: reason OutOf<resource>. The node's extended resources here are its
    devices (labkit.numa.machine); labkit.numa.admission reconstructs the managers only."""
    from labkit.numa.machine import load_machine

    devices = load_machine(machine).devices
    for container in pod.init_containers + pod.containers:
        for resource, quantity in sorted({**container.requests, **container.limits}.items()):
            if resource in NATIVE or resource.startswith("hugepages-"):
                continue
            wanted, have = quantity.value_int(), len(devices.get(resource, []))
            if wanted > have:
                return (f"OutOf{resource}: Node didn't have enough resource: {resource}, requested: {wanted}, "
                        f"used: 0, capacity: {have}")
    return None


def check_single_numa(ctx):
    from labkit.numa.pods import pod_from_dict
    from labkit.strict import StrictDecodingError, load_strict

    manifest = ctx.answer()
    try:
        load_strict(ctx.answer_path.read_text(), str(ctx.answer_path))
    except StrictDecodingError as exc:
        raise CheckFailed(f"your answer is not a Pod the API server creates as written: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("kind") != "Pod" or manifest.get("apiVersion") != "v1":
        raise CheckFailed("your answer is not a Pod the API server creates: it must be one manifest with "
                          f"apiVersion: v1 and kind: Pod (found apiVersion {manifest.get('apiVersion')!r}, kind "
                          f"{manifest.get('kind')!r})" if isinstance(manifest, dict) else
                          "your answer is not a Pod the API server creates: it must be one Pod manifest")
    try:
        pod = pod_from_dict(manifest, ctx.answer_path)
    except LabkitError as exc:
        raise CheckFailed(f"your answer is not a Pod the API server creates: {exc}") from None
    missing = _missing_images(manifest)
    if missing:     # validateContainerCommon (pkg/apis/core/validation/validation.go): a container needs an image
        raise CheckFailed(f"your answer is not a Pod the API server creates: The Pod {pod.name!r} is invalid: "
                          + ", ".join(f"{path}: Required value" for path in missing))
    lacking = _node_lacks(ctx.params["machine"], pod)
    if lacking:
        return ctx.failed(f"best-effort rejects Pod {pod.name} too, before it runs: {lacking}",
                          expected="best-effort: admitted; single-numa-node: rejected (TopologyAffinityError)",
                          observed=f"kubelet with your Pod: rejected under both policies ({lacking.split(':')[0]})")
    best, single = _two_policies(ctx.params["machine"], pod)
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


# the rules of takeByTopology an exclusive set can break (_cpu_reason), as against a set at odds with
# the Pod file (its size), the config (a reserved CPU) or the answer itself (a CPU given twice)
PICKING_RULES = ("NUMA packing", "hyperthread siblings", "packing")
NAME_AFTER = 3      # different wrong answers checked before the feedback names one container


def _picking_feedback(ctx, picked: list[tuple[str, str]]) -> str:
    """Feedback on exclusive CPU sets that are not the ones takeByTopology picks: the rules they
    break, not which containers nor how many (either would let changing one container's CPUs at a
    time stand in for working the packing out); from the NAME_AFTER-th different wrong answer
    (LabState.answer_tries, counted as grid_feedback counts) one container, the first in
    admission order, with its rule."""
    tries = ctx.count_wrong_answer()
    rules = list(dict.fromkeys(reason for _, reason in picked))
    withheld = ("how many containers, and names only the first in admission order" if tries >= NAME_AFTER else
                f"which containers or how many, and names one only after {NAME_AFTER} different wrong answers")
    message = (f"exclusive CPU sets in your answer are not the ones the static policy picks ({tries} different wrong "
               f"{'answer' if tries == 1 else 'answers'} checked; labkit does not say {withheld}); "
               "the rules broken:\n    " + "\n    ".join(rules))
    if tries >= NAME_AFTER:
        key, reason = picked[0]
        message += f"\n  one of them, the first in admission order: {key}: {reason.split(':')[0]}"
    return message


SHARED_RULE = ("the static policy gives exclusive CPUs only to containers of Guaranteed Pods whose CPU request is a "
               "whole number (guaranteedCPUs, pkg/kubelet/cm/cpumanager/policy_static.go)")


def judge_static_cpus(ctx, data):
    given = ctx.answer_field(data, "cpus", dict)
    pool_given = ctx.answer_field(data, "defaultCpuSet", (str, int, list))
    node, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                           [Path(ctx.params["pods"]).name])
    topo, reserved = node.topology, node.reserved_cpus()
    known = {f"{r.pod.name}/{e.name}" for r in results for e in r.containers}
    wrong = [f"{key}: no such container in {ctx.params['pods']} (keys are <pod>/<container>)"
             for key in sorted(set(given) - known, key=str)]
    taken_in_answer, toggles, picked, total = {}, [], [], 0
    for result in results:
        for entry in result.containers:
            key = f"{result.pod.name}/{entry.name}"
            total += 1
            if key not in given:
                wrong.append(f"{key}: missing")
                continue
            if str(given[key]).strip().lower() == "shared":
                if entry.exclusive:
                    toggles.append(f"whether {key} gets exclusive CPUs")
                continue
            cpus = _cpus(given[key], f"cpus.{key}")
            unknown = cpus - topo.cpus()
            if unknown:
                wrong.append(f"{key}: CPU {format_cpus(unknown)} does not exist on {ctx.params['machine']}")
            elif not entry.exclusive:
                toggles.append(f"whether {key} gets exclusive CPUs")
            elif cpus != entry.cpus:
                hint = entry.best_hint
                hint_nodes = None if hint is None or hint.mask is None else set(bitmask.get_bits(hint.mask))
                reason = _cpu_reason(topo, reserved, entry, cpus, hint_nodes, taken_in_answer)
                if reason.split(":")[0] in PICKING_RULES:
                    picked.append((key, reason))
                else:       # at odds with the Pod file, the config or the answer itself: named
                    wrong.append(f"{key}: {reason}")
            taken_in_answer[key] = cpus
    pool = _cpus(pool_given, "defaultCpuSet")
    if pool != node.shared_pool():
        mine = frozenset().union(*taken_in_answer.values()) if taken_in_answer else frozenset()
        if reserved - pool:
            wrong.append("defaultCpuSet: the reserved CPU stays in the shared pool")
        elif pool & mine:
            wrong.append(f"defaultCpuSet: CPU {format_cpus(pool & mine)} is given exclusively in your own answer")
        elif pool == topo.cpus() - mine:
            # the pool your own exclusive sets leave: it is wrong because some of them are
            wrong.append("defaultCpuSet: the CPUs your answer's exclusive sets leave, so it is wrong where they are")
        else:
            wrong.append("defaultCpuSet: not the CPUs left after every exclusive assignment")
    note = _situation(ctx, ctx.params["pods"], ctx.params["config"])
    if picked:
        wrong.insert(0, _picking_feedback(ctx, picked))
    if toggles:     # a small grid of its own (shared or exclusive per container): counted, not named
        wrong.insert(0, f"{ctx.grid_feedback(toggles, total, 'shared-or-exclusive choices', advice=GRID_ADVICE)}: {SHARED_RULE}")
    if not wrong:
        return ctx.passed(f"all CPU sets right{note}")
    complete = not any(w.endswith(": missing") or "no such container" in w for w in wrong)
    return ctx.failed("wrong CPU sets:\n  " + "\n  ".join(wrong) + note, expected="every one of the CPU sets right",
                      observed=f"{_answered(ctx)}: " + ", ".join(f"{k}: {v}" for k, v in given.items())
                      + f"; defaultCpuSet: {pool_given}", complete=complete,
                      **({} if complete else {"malformed": True}))    # incomplete: not a wrong answer to count


def check_static_cpus(ctx):
    answer, note = _prediction(ctx)
    return _recorded(ctx, judge_static_cpus(ctx, answer), note)


# -- (f) Memory Manager -------------------------------------------------------------------------------------

MEMORY_RULES = ("Where to look: allocatable memory per NUMA node (`labkit numa show --machine lab-two-node --config "
                "scenarios/kubelet-memory.yaml`); the narrowest NUMA placement with enough free memory wins, lower "
                "nodes first; a container that fits on no single node needs a group of nodes, a node that serves a "
                "single-node allocation cannot join a group, and a group is only ever used whole "
                "(pkg/kubelet/cm/memorymanager/policy_static.go, calculateHints and isAffinitySatisfyRequest).")


def judge_memory(ctx, data):
    admitted = ctx.answer_field(data, "admitted", dict)
    memory = ctx.answer_field(data, "memory", dict)
    _, results = _admit(ctx.params["machine"], SCENARIOS / Path(ctx.params["config"]).name,
                        [Path(ctx.params["pods"]).name])
    pods = {r.pod.name: r for r in results}
    containers = {f"{r.pod.name}/{e.name}": r for r in results for e in r.containers}
    problems = [f"admitted.{name}: no such Pod in {ctx.params['pods']}" for name in sorted(set(admitted) - set(pods), key=str)]
    problems += [f"memory.{key}: no such container in {ctx.params['pods']} (keys are <pod>/<container>)"
                 for key in sorted(set(memory) - set(containers), key=str)]
    said = {}
    for name in pods:
        if name not in admitted:
            problems.append(f"admitted.{name}: missing")
        else:
            said[name] = _bool(admitted[name], f"admitted.{name}")
    for key, result in containers.items():
        name = result.pod.name
        if key in memory:
            if said.get(name) is False:
                problems.append(f"memory.{key}: given for a Pod your answer rejects (only admitted containers get "
                                "memory)")
            elif not _mask(memory[key], f"memory.{key}"):
                problems.append(f"memory.{key}: a list of one or more NUMA node ids")
        elif said.get(name) is True:
            problems.append(f"memory.{key}: missing (your answer admits {name})")
    shown = ", ".join(f"{k}: {'admitted' if v is True else 'rejected' if v is False else v}" for k, v in admitted.items())
    shown += "; memory " + ", ".join(f"{k}: {v}" for k, v in memory.items())
    if problems:
        return ctx.failed("your answer needs admitted for every Pod and memory for every container it admits:\n  "
                          + "\n  ".join(problems), expected="admitted for each Pod, memory for each admitted container",
                          observed=f"{_answered(ctx)}: {shown}",
                          malformed=True)     # not a wrong answer to count (run_check): nothing judged yet
    wrong, total = [], 0
    for result in results:
        total += 1
        if said[result.pod.name] != result.admitted:
            wrong.append(f"whether {result.pod.name} is admitted")
        if not result.admitted:
            continue
        for entry in result.containers:
            key = f"{result.pod.name}/{entry.name}"
            total += 1
            if key not in memory or _mask(memory[key], key) != sorted(entry.memory_nodes or []):
                wrong.append(f"the memory nodes of {key}")
    return _grid(ctx, wrong, total, "admissions and memory placements", MEMORY_RULES,
                 _situation(ctx, ctx.params["pods"], ctx.params["config"]), shown)


def check_memory(ctx):
    answer, note = _prediction(ctx)
    return _recorded(ctx, judge_memory(ctx, answer), note)


# -- (g) the corrupted checkpoint -----------------------------------------------------------------------------

NODE_FILES = ("machine.json", "kubelet-config.yaml", "probe-pod.yaml", "pods.yaml",
              "kubelet/cpu_manager_state", "kubelet/memory_manager_state")


def observe_checkpoint(ctx) -> dict:
    """node-b's files as they are (None: absent): the kubelet's view is reconstructed from them."""
    node_dir = ctx.env.dir / ctx.params["node"]
    out = {}
    for name in NODE_FILES:
        try:
            out[name] = (node_dir / name).read_text()
        except (OSError, UnicodeDecodeError):
            out[name] = None
    return out


def _bound_pods(path: Path) -> list:
    """The Pods still bound to the node: none when the file is gone or holds no document (drained)."""
    from labkit.numa.pods import load_pods

    if not path.exists():
        return []
    try:
        return load_pods(path, allow_empty=True)
    except LabkitError as exc:
        raise CheckFailed(f"{path.name} of node-b cannot be read: {exc}") from None


def _pristine_node_b() -> dict:
    """What node-b's unchanged files hold as the lab builds them (lab.build_node_b)."""
    from labkit.numa.machine import load_machine
    return {"machine.json": Path(load_machine("lab-two-node").source).read_text(),
            "kubelet-config.yaml": (SCENARIOS / "kubelet-config.yaml").read_text(),
            "probe-pod.yaml": (SCENARIOS / "node-b-probe.yaml").read_text()}


def judge_checkpoint(ctx, files: dict):
    """The kubelet of node-b, reconstructed (labkit.numa.admission.Node: cpu_manager.go Start, the
    checkpoints' restore in cpumanager/state/state_checkpoint.go) from the observed files, written
    to a scratch directory: nothing here changes node-b."""
    import tempfile

    from labkit.numa.admission import KubeletStartError
    from labkit.numa.pods import load_pods

    name = ctx.params["node"]
    changed = [f"{name}/{f}" for f, text in _pristine_node_b().items() if files.get(f) != text]
    if changed:
        return ctx.failed(f"{', '.join(changed)} changed: the exercise repairs the checkpoint only; the machine, the "
                          "kubelet configuration and the probe Pod stay as the lab built them (`labkit reset numa "
                          "checkpoint` keeps a copy of your files)", expected=f"{name}'s other files unchanged",
                          observed=f"on {name}: {', '.join(changed)} differ from the lab as built")
    with tempfile.TemporaryDirectory(prefix="numa-node-b-") as scratch:
        node_dir = Path(scratch)
        (node_dir / "kubelet").mkdir()
        for f, text in files.items():
            if text is not None:
                (node_dir / f).write_text(text)
        pods = _bound_pods(node_dir / "pods.yaml")
        state = node_dir / "kubelet"
        try:
            node = _node(str(node_dir / "machine.json"), node_dir / "kubelet-config.yaml", state)
        except KubeletStartError as exc:
            message = str(exc).replace(f"{scratch}/", f"{name}/").replace(scratch, name)
            return ctx.failed(f"{name}'s kubelet still does not start: {message}",
                              expected="kubelet starts", observed=f"on {name}: kubelet refuses to start")
        originally = {pod.uid: pod for pod in load_pods(SCENARIOS / "node-b-pods.yaml")}
        # a Pod still bound keeps the spec it was admitted with: a drain removes Pods from the list,
        # an edit of their resources there changes nothing of them (a resize may not change the QoS
        # class either: pkg/apis/core/validation ValidatePodResize), so each is judged as bound
        lost, rewritten = [], []
        for listed in pods:
            pod = originally.get(listed.uid, listed)
            for container in pod.all_containers():
                wants = node.cpu_policy.guaranteed_cpus(pod, container)
                if wants and node.cpu_state.get_cpu_set(pod.uid, container.name) is None:
                    lost.append(f"{pod.namespace}/{pod.name}/{container.name}")
                    as_listed = _container(listed, container.name)
                    if pod is not listed and (as_listed is None or not node.cpu_policy.guaranteed_cpus(listed, as_listed)):
                        rewritten.append(f"{pod.namespace}/{pod.name}")
        if lost:
            note = (f" ({name}/pods.yaml lists {', '.join(dict.fromkeys(rewritten))} with other resources, but a bound "
                    "Pod keeps those it was admitted with: only draining takes it off the list)") if rewritten else ""
            return ctx.failed(
                f"the kubelet starts, but Pods still bound to {name} lost their exclusive CPUs ({', '.join(lost)}): "
                f"they would now share CPUs with the next Pods. The node must be drained before the checkpoint is "
                f"deleted{note}.", expected=f"no Pod on {name} without its exclusive CPUs",
                observed=f"on {name}: {len(pods)} Pod(s) still bound")
        kept = sorted(f"{originally[uid].namespace}/{originally[uid].name}" for uid in node.cpu_state.assignments
                      if uid in originally)
        if kept:
            return ctx.failed(
                f"{name}/kubelet/cpu_manager_state was edited by hand again: it still holds the CPUs of {', '.join(kept)}, "
                "which ran before. The documented way is to drain the node, delete the file and start the kubelet, "
                "which writes a fresh one.", expected="a checkpoint the kubelet wrote afresh (or none)",
                observed=f"on {name}: assignments of the Pods that ran before")
        probe_pods = load_pods(node_dir / "probe-pod.yaml")
        node.remove_stale_state({pod.uid for pod in pods} | {p.uid for p in probe_pods})
        (probe,) = node.admit_all(probe_pods)
        if not probe.admitted:
            return ctx.failed(f"the kubelet starts but rejects the probe Pod: {probe.result.message}",
                              expected="the probe Pod admitted", observed=f"on {name}: {probe.result.reason}")
        return ctx.passed(f"{name}'s kubelet starts ({len(pods)} Pod(s) still bound) and admits the probe Pod "
                          f"on CPUs {format_cpus(probe.containers[0].cpus)}")


def _container(pod, name: str):
    """The Pod's container (or init container) of that name, or None."""
    return next((c for c in pod.all_containers() if c.name == name), None)


def check_checkpoint(ctx):
    return judge_checkpoint(ctx, observe_checkpoint(ctx))


# -- (h) real pinning ----------------------------------------------------------------------------------------


def observe_pin(ctx) -> dict:
    """The answer, and the live node as kubelet and the kernel see it: every container of every Pod,
    what kubelet wants for it (exclusive CPUs or the shared pool) and each of its processes'
    Cpus_allowed_list from /proc; the kubelet configuration's text."""
    from labkit.numa.livenode import LiveNode

    live = LiveNode(ctx.env)
    try:
        answer = _answer(ctx)
    except CheckFailed as exc:
        answer = {"unreadable": exc.message}
    node = live.kubelet()
    containers = []
    for view in live.views(node):
        affinity = {}
        for pid in view.pids:
            found = runtime.proc_affinity(pid)
            if found is not None:
                affinity[pid] = sorted(found.cpus)
        containers.append({"pod": view.pod.name, "namespace": view.pod.namespace, "qos": view.pod.qos,
                           "container": view.container.name, "init": view.container.init and not view.container.sidecar,
                           "exclusive": view.exclusive, "want_cpus": sorted(view.want_cpus), "pids": affinity})
    return {"answer": answer, "containers": containers, "shared_pool": sorted(node.shared_pool()),
            "reserved": sorted(node.reserved_cpus()), "config": live.config_path.read_text(),
            "machine": json.loads(live.machine_path.read_text())}


def judge_pin(ctx, seen: dict):
    """The whole of pin on an observation: the node as built, the answer read from /proc, every
    container of the Guaranteed Pod exclusive, nobody else on its CPUs, the Burstable Pod on the shared
    pool. What was seen on the node is reported as seen in the live lab."""
    try:
        return _judge_pin(ctx, seen)
    except CheckFailed as exc:
        if isinstance(exc.observed, str) and exc.observed.startswith("live: "):
            exc.observed_in = LIVE
        raise


def _judge_pin(ctx, seen: dict):
    from labkit.numa.cpuset import format_cpus as fmt

    data = seen["answer"]
    if isinstance(data, dict) and set(data) == {"unreadable"}:
        raise CheckFailed(data["unreadable"])
    containers = seen["containers"]
    shared_pool = frozenset(seen["shared_pool"])
    reserved = frozenset(seen["reserved"])
    # the node as built: its kubelet configuration and its node agent
    if seen["config"] != ctx.lab.environment_module().live_config(seen["machine"]):
        raise CheckFailed("the live node's kubelet-config.yaml was changed: the exercise runs Pods on the kubelet as "
                          "built (reserved CPU, static policy); `labkit reset numa pin` keeps a copy of your file",
                          expected="kubelet-config.yaml as the lab built it", observed="live: kubelet-config.yaml differs",
                          observed_in=LIVE)
    if not any(c["namespace"] == "kube-system" and c["pod"] == "node-agent" and c["pids"] for c in containers):
        raise CheckFailed("the node agent Pod kube-system/node-agent no longer runs: it stays as the lab built it "
                          "(it shows that the exclusive CPU is taken from every other container)",
                          expected="kube-system/node-agent running", observed="live: node-agent gone",
                          observed_in=LIVE)
    # the Pods the student ran, in whatever namespace (metadata.namespace of the file, `default`
    # when it has none), and the lab's own (its node agent)
    pods: dict[tuple[str, str], list] = {}
    for c in containers:
        pods.setdefault((c["namespace"], c["pod"]), []).append(c)
    ours = {key: pod for key, pod in pods.items() if key not in LAB_PODS}
    shown = lambda key: key[1] if key[0] == "default" else f"{key[0]}/{key[1]}"
    chosen = {}
    for role, qos in (("guaranteed", "Guaranteed"), ("burstable", "Burstable")):
        entry = ctx.answer_field(data, role, dict)
        name, pid, listed = entry.get("pod"), entry.get("pid"), entry.get("cpus_allowed_list")
        if not isinstance(name, str):
            raise AnswerMalformed(f"{role}.pod should be a Pod's name, got {_shown(name)}\n  {ctx.answer_path}")
        if not isinstance(pid, int) or isinstance(pid, bool):
            raise AnswerMalformed(f"{role}.pid should be a process id (a number), got {_shown(pid)}\n  {ctx.answer_path}")
        namespace, _, short = name.rpartition("/")
        named = [key for key in sorted(ours) if key[1] == short and namespace in ("", key[0])]
        if not named:
            lab_own = [key for key in sorted(LAB_PODS) if key in pods and key[1] == short and namespace in ("", key[0])]
            if lab_own:
                raise CheckFailed(f"{role}: Pod {shown(lab_own[0])} is the lab's own: name a Pod you ran "
                                  "with `labkit numa run -f FILE`", observed=f"live: {lab_own[0][0]}/{short}")
            running = ", ".join(shown(key) for key in sorted(ours)) or "none"
            raise CheckFailed(f"{role}: no running Pod {name!r} on the live node (running: {running})",
                              observed=f"live: Pods {running}")
        if len(named) > 1:
            raise CheckFailed(f"{role}: Pods named {short} run in namespaces {', '.join(key[0] for key in named)}: "
                              f"write which one as <namespace>/{short}", observed=f"your answer: {name}")
        key = named[0]
        name = shown(key)
        pod = pods[key]
        if pod[0]["qos"] != qos:
            raise CheckFailed(f"{role}: Pod {name} is {pod[0]['qos']}, not {qos}", expected=qos,
                              observed=f"live: Pod {name} is {pod[0]['qos']}")
        owner = next((c for c in pod if pid in c["pids"]), None)
        if owner is None:
            raise CheckFailed(f"{role}: process {pid!r} is not a container process of Pod {name}: `labkit numa show` "
                              "lists them", observed=f"your answer: pid {pid}")
        if _cpus(listed, f"{role}.cpus_allowed_list") != frozenset(owner["pids"][pid]):
            raise CheckFailed(f"{role}: {listed!r} is not what /proc/{pid}/status says in Cpus_allowed_list: read it "
                              "there", expected="Cpus_allowed_list as the kernel reports it",
                              observed=f"your answer: {listed}")
        chosen[role] = (name, pod)
    g_name, g_pod = chosen["guaranteed"]
    b_name, b_pod = chosen["burstable"]
    label = lambda c: f"{c['namespace']}/{c['pod']}/{c['container']}"
    # every running container of the Guaranteed Pod: exclusive, none reserved, every process on exactly those CPUs
    exclusive = frozenset()
    for c in g_pod:
        if c["init"]:
            continue
        if not c["exclusive"]:
            raise CheckFailed(f"container {label(c)} has no exclusive CPUs: ask for a whole number of CPUs "
                              "with requests equal to limits", expected="exclusive CPUs",
                              observed=f"live: {label(c)} in the shared pool")
        want = frozenset(c["want_cpus"])
        if want & reserved:
            raise CheckFailed(f"container {label(c)} holds the reserved CPU {fmt(want & reserved)} exclusively",
                              observed=f"live: {label(c)} on {fmt(want)}")
        for pid, cpus in c["pids"].items():
            if frozenset(cpus) != want:
                raise CheckFailed(f"{label(c)}: process {pid} runs on {fmt(cpus)}, not on its exclusive CPUs "
                                  f"{fmt(want)}", observed=f"live: Cpus_allowed_list {fmt(cpus)}")
        if want & shared_pool:
            raise CheckFailed(f"the exclusive CPU(s) {fmt(want & shared_pool)} of {label(c)} are still in the shared "
                              "pool", observed=f"live: shared pool {fmt(shared_pool)}")
        exclusive |= want
    # no other container of any Pod may run there
    sharing = sorted({f"{c['namespace']}/{c['pod']}/{c['container']}" for c in containers
                      if (c["namespace"], c["pod"]) != (g_pod[0]["namespace"], g_pod[0]["pod"])
                      for cpus in c["pids"].values() if set(cpus) & exclusive})
    if sharing:
        raise CheckFailed(f"CPU(s) {fmt(exclusive)} of Pod {g_name} are also allowed to {', '.join(sharing)}",
                          observed=f"live: {', '.join(sharing)} may run there")
    # every process of every running container of the Burstable Pod on exactly the shared pool
    for c in b_pod:
        for pid, cpus in c["pids"].items():
            if frozenset(cpus) != shared_pool:
                raise CheckFailed(f"{label(c)}: process {pid} runs on {fmt(cpus)}, not on the shared pool "
                                  f"{fmt(shared_pool)}", observed=f"live: Cpus_allowed_list {fmt(cpus)}")
    return ctx.passed(f"Pod {g_name} has CPU(s) {fmt(exclusive)} to itself among the Pods' containers (system "
                      f"processes may still run there); Pod {b_name} runs on the shared pool {fmt(shared_pool)} "
                      "(read from /proc)")


def check_pin(ctx):
    return judge_pin(ctx, observe_pin(ctx))
