"""Near-misses of the merge decisions: every mask, preferred flag and admit of both containers under
each policy changed to each other value a two-node machine allows, each entry and key dropped."""

import dataclasses

from labkit.mutants import answer_mutants

MASKS = [[0], [1], [0, 1], None]
SET = "a mask is a set of NUMA nodes (a bitmask in kubelet): the order they are written in does not matter"


def mutants(ctx):
    answer = ctx.answer()
    alternatives = {}
    for container, policies in answer.items():
        for policy, entry in policies.items():
            alternatives[f"{container}.{policy}.mask"] = [m for m in MASKS if m != entry["mask"]]
            if entry["mask"] is not None:
                for j in range(len(entry["mask"])):
                    alternatives[f"{container}.{policy}.mask[{j}]"] = [0, 1]

    def names(edit):
        if edit.op == "drop":
            return (edit.key,) if edit.path.count(".") < 2 else ("expected", "mask, preferred, admit")
        return ("your prediction", "not right")

    for mutant in answer_mutants(answer, alternatives=alternatives, names=names):
        if mutant.name.startswith("swap:") and mutant.name.endswith(".mask"):
            mutant = dataclasses.replace(mutant, names=(), equivalent=SET)
        yield mutant
    # a list-valued mask replaced as a whole: widened, narrowed, moved, or nil
    import copy
    from labkit.mutants import Mutant
    for container, policies in answer.items():
        for policy, entry in policies.items():
            if entry["mask"] is None:
                continue
            for other in MASKS:
                if other == entry["mask"]:
                    continue
                changed = copy.deepcopy(answer)
                changed[container][policy]["mask"] = other
                yield Mutant(f"mask:{container}.{policy}={other}", f"answer: {container}.{policy}.mask -> {other}",
                             names=("your prediction", "not right"), answer=changed)
