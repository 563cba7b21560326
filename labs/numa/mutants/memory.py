"""Near-misses of the Memory Manager answer: each admission flipped, each container's NUMA nodes
moved, narrowed or widened, each entry and key dropped, memory given to the rejected Pod."""

import copy

from labkit.mutants import Mutant, answer_mutants

NODES = [[0], [1], [0, 1]]


def mutants(ctx):
    answer = ctx.answer()
    admitted = answer["admitted"]
    alternatives = {f"memory.{key}": [n for n in NODES if n != nodes] for key, nodes in answer["memory"].items()}
    for key, nodes in answer["memory"].items():
        for j in range(len(nodes)):
            alternatives[f"memory.{key}[{j}]"] = [0, 1]

    def names(edit):
        if edit.op == "drop" and edit.path in ("admitted", "memory"):
            return (edit.key,)
        if edit.op == "drop" or (edit.op == "drop-item" and len(answer["memory"][edit.path.split(".", 1)[1].split("[")[0]]) == 1):
            return (edit.key.split("[")[0], "missing") if edit.op == "drop" else ("one or more NUMA node",)
        if edit.op == "set" and edit.path.startswith("admitted.") and not edit.after:
            pod = edit.key
            if any(k.startswith(pod + "/") for k in answer["memory"]):
                return ("given for a Pod your answer rejects",)
        if edit.op == "set" and edit.path.startswith("admitted.") and edit.after:
            return ("missing", "your answer admits")
        return ("your prediction", "not right")

    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    for pod, ok in admitted.items():
        if not ok:
            both = copy.deepcopy(answer)
            both["admitted"][pod] = True
            both["memory"][f"{pod}/app"] = [0, 1]
            yield Mutant(f"admit:{pod}", f"answer: {pod} admitted with memory on both nodes",
                         names=("your prediction", "not right"), answer=both)
            extra = copy.deepcopy(answer)
            extra["memory"][f"{pod}/app"] = [0, 1]
            yield Mutant(f"memory-for-rejected:{pod}", f"answer: {pod} rejected, yet given memory",
                         names=("given for a Pod your answer rejects",), answer=extra)
    for key, nodes in answer["memory"].items():
        for other in NODES:
            if other != nodes:
                changed = copy.deepcopy(answer)
                changed["memory"][key] = other
                yield Mutant(f"memory:{key}={other}", f"answer: memory.{key} -> {other}",
                             names=("your prediction", "not right"), answer=changed)
