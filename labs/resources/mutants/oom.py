"""Near-misses of the oom reference: the answer (the other container, the other cause, typos,
keys left out), and the fixed Pod with one field dropped or changed at a time: the indexer's
limit halved, doubled, one MiB off, in MB instead of MiB, dropped; its request likewise; every
command argument (the workload), the other container, the names. Whether a change of the
indexer's memory request or limit still solves it is decided by the reconstruction: the limit
must exist, stay below the node's memory and hold what the command allocates plus the
interpreter (checks.INTERPRETER) with a tenth more (checks.MIN_ROOM), at most twice that
(checks.ROOM); the request is the student's to choose (the API server keeps it at most the limit).
A limit just above the allocation (one and five MiB more than it and the interpreter) is added."""

from labkit.mutants import Mutant, answer_mutants
from labkit.resources.nearmiss import fixed_part_changed, neighbour_mutants, pod_edits, replace_with, with_pod
from labkit.resources.workload import memory_target


def _free_verdict(checks, pod, killed, capacity):
    c = next(c for c in pod.containers if c.name == killed)
    limit = c.limits.get("memory")
    if limit is None or not limit.value:
        return ("keeps no memory limit",), None
    target = memory_target(c.command)
    if limit.value_int() >= capacity:
        return ("not below",), None
    if target + checks.INTERPRETER > limit.value_int():
        return ("OOMKilled",), None
    if limit.value_int() < checks.MIN_ROOM * (target + checks.INTERPRETER):
        return ("hardly any room",), None
    if limit.value_int() > checks.ROOM * (target + checks.INTERPRETER):
        return ("far above",), None
    return (), (f"limit {limit} holds the {target // 2 ** 20}Mi the command allocates plus the interpreter, at most "
                f"twice that; the request is not judged beyond the API server's validation")


def mutants(ctx):
    import labkit.resources.node as nodes
    p = ctx.params
    checks = ctx.lab._load("checks.py")
    original = checks._pristine("node-1.yaml", p["node"])[p["pod"]]
    killed, _cause = checks._oom_truth(original)
    others = [c.name for c in original.containers if c.name != killed]
    yield from answer_mutants(ctx.answer(), alternatives={"container": others + [killed[:-1], ""],
                                                          "cause": ["node", "limit"[:-1], ""]})
    observation = checks.observe_oom(ctx)
    node = nodes.lab_nodes(ctx.env)[p["node"]]
    capacity = node.config.memory_capacity
    reference = observation[p["pod"]]["manifest"]
    live = {"set:spec.containers[1].command[3]=200M", "set:spec.containers[1].resources.limits.memory=128Mi"}
    for pe in pod_edits(reference, p["node"], node.config.priority_classes):
        changed = with_pod(observation, p["pod"], pe.manifest)
        key = pe.name.split(":", 1)[1]
        if pe.pod.name != p["pod"]:
            yield Mutant(pe.name, f"Pod {pe.edit.describe()}", names=(p["pod"], "not on"), observation=changed)
            continue
        names = fixed_part_changed(pe, original.manifest["spec"], killed, [("limits", "memory"), ("requests", "memory")])
        equivalent = None
        if names is None:
            names, equivalent = _free_verdict(checks, pe.pod, killed, capacity)
        yield Mutant(pe.name, f"Pod {pe.edit.describe()}", names=names, observation=changed, equivalent=equivalent,
                     apply=replace_with(p["node"], pe.manifest) if key in live else None)
    # a limit that holds the allocation and the interpreter with almost nothing to spare
    import copy
    container = next(i for i, c in enumerate(reference["spec"]["containers"]) if c["name"] == killed)
    need = memory_target(reference["spec"]["containers"][container]["command"]) + checks.INTERPRETER
    for spare in (1, 5):
        tight = copy.deepcopy(reference)
        tight["spec"]["containers"][container]["resources"]["limits"]["memory"] = f"{need // 2 ** 20 + spare}Mi"
        yield Mutant(f"tight-limit+{spare}Mi", f"the {killed}'s limit {need // 2 ** 20 + spare}Mi", names=("hardly any room",),
                     observation=with_pod(observation, p["pod"], tight))
    others = [n for n in checks._pristine("node-1.yaml", p["node"])
              if n != p["pod"] and n not in checks.CHANGED_BY_EXERCISES[p["node"]]]
    yield from neighbour_mutants(observation, p["node"], others, node.config.priority_classes)
