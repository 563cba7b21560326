"""Near-misses of the static policy's CPUs: each container's CPUs with one CPU swapped for each other
CPU of the machine, cut short, emptied, made shared (or exclusive), left out; the shared pool with
each CPU added or taken out; each key dropped."""

import copy
from pathlib import Path

from labkit.mutants import Mutant, answer_mutants


def mutants(ctx):
    from labkit.numa.cpuset import format_cpus, parse
    from labkit.numa.machine import load_machine
    from labkit.numa.topology import CPUTopology

    answer = ctx.answer()
    every = sorted(CPUTopology.discover(load_machine(ctx.params["machine"])).cpus())
    alternatives = {}
    for key, value in answer["cpus"].items():
        text = str(value)
        alternatives[f"cpus.{key}"] = list(dict.fromkeys([text[:-1], "", "11" if text == "shared" else "shared"]))
    pool = str(answer["defaultCpuSet"])
    alternatives["defaultCpuSet"] = list(dict.fromkeys([pool[:-1], ""]))
    exclusive = {key for key, value in answer["cpus"].items() if str(value) != "shared"}

    def names(edit):
        """Shared or exclusive flipped: the grid of those choices counts it; anything else names its key."""
        key = edit.key
        if edit.op == "set" and edit.path.startswith("cpus.") and (
                (key in exclusive and edit.after == "shared") or (key not in exclusive and edit.after in ("", "11"))):
            return ("shared-or-exclusive choices", "wrong")
        return (key,)

    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    checks = ctx.lab._load("checks.py")
    node, results = checks._admit(ctx.params["machine"], checks.SCENARIOS / Path(ctx.params["config"]).name,
                            [Path(ctx.params["pods"]).name])
    reserved, earlier = node.reserved_cpus(), set()

    def swapped(key, instead):
        """A reserved CPU, or one an earlier container holds, names the container; any other swap
        breaks a rule of takeByTopology, which the feedback names without the container."""
        if instead in reserved:
            return (key, "reserved")
        if instead in earlier:
            return (key, "already")
        return ("static policy picks",)

    admitted = [f"{r.pod.name}/{e.name}" for r in results for e in r.containers]     # the check's order
    for key, value in sorted(answer["cpus"].items(), key=lambda kv: admitted.index(kv[0])):
        if str(value) == "shared":
            continue
        cpus = parse(str(value))
        for gone in sorted(cpus):
            for instead in every:
                if instead in cpus:
                    continue
                changed = copy.deepcopy(answer)
                changed["cpus"][key] = format_cpus(cpus - {gone} | {instead})
                yield Mutant(f"swap-cpu:{key}:{gone}->{instead}", f"answer: {key} with CPU {instead} instead of {gone}",
                             names=swapped(key, instead), answer=changed)
        earlier |= cpus
    held = parse(pool)
    for cpu in every:
        changed = copy.deepcopy(answer)
        changed["defaultCpuSet"] = format_cpus(held ^ {cpu})
        yield Mutant(f"pool:{cpu}", f"answer: CPU {cpu} {'taken out of' if cpu in held else 'added to'} the shared pool",
                     names=("defaultCpuSet",), answer=changed)
