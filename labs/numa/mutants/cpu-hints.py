"""Near-misses of the CPU hints: each hint dropped, its mask narrowed, widened or moved to another
(or a missing) NUMA node, its preferred flag flipped, and every other mask of the machine added as
a hint, preferred or not; the same mask listed twice."""

import copy
import dataclasses
from itertools import combinations

from labkit.mutants import Mutant, answer_mutants


def _masks(nodes):
    return [list(m) for k in range(1, len(nodes) + 1) for m in combinations(nodes, k)]


def mutants(ctx):
    from labkit.numa.machine import load_machine
    from labkit.numa.topology import CPUTopology

    answer = ctx.answer()
    nodes = sorted(CPUTopology.discover(load_machine(ctx.params["machine"])).numa_nodes())
    bad_node = max(nodes) + 1

    def names(edit):
        if edit.op in ("drop-item", "swap") or (edit.op == "set" and edit.key == "preferred"):
            return ("your prediction", "not right")
        if edit.op == "set" and edit.key == "mask" or "mask[" in edit.path:
            value = edit.after
            if isinstance(value, int) and value not in nodes:
                return ("does not exist",)
            return ("your prediction", "not right")
        return (edit.key,)

    alternatives = {}
    for i, hint in enumerate(answer["hints"]):
        for j, _node in enumerate(hint["mask"]):
            alternatives[f"hints[{i}].mask[{j}]"] = [n for n in nodes] + [bad_node]
    for mutant in answer_mutants(answer, alternatives=alternatives, names=names):
        if mutant.name.startswith("swap:") and mutant.name.endswith(".mask"):
            mutant = dataclasses.replace(mutant, names=(), equivalent="a mask is a set of NUMA nodes (a bitmask in "
                                         "kubelet): the order they are written in does not matter")
        yield mutant
    given = {tuple(sorted(h["mask"])) for h in answer["hints"]}
    for mask in _masks(nodes):
        if tuple(mask) in given:
            continue
        for preferred in (True, False):
            more = copy.deepcopy(answer)
            more["hints"].append({"mask": mask, "preferred": preferred})
            yield Mutant(f"add:{mask}:{preferred}", f"answer: {mask} added as a hint, preferred {preferred}",
                         names=("your prediction", "not right"), answer=more)
    if answer["hints"]:
        twice = copy.deepcopy(answer)
        first = twice["hints"][0]
        twice["hints"].append({"mask": list(reversed(first["mask"])), "preferred": not first["preferred"]})
        yield Mutant("twice", "answer: the first hint listed again with the other flag", names=("listed twice",),
                     answer=twice)
