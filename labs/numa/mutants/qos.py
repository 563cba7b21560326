"""Near-misses of the QoS classes: each Pod's class swapped for each other class or misspelt, each
Pod left out, the key dropped, a Pod that is not in the file added."""

import copy

from labkit.mutants import Mutant, answer_mutants

CLASSES = ("Guaranteed", "Burstable", "BestEffort")


def _names(edit):
    if edit.op == "set" and edit.after in CLASSES:
        return ("your prediction", "not right")        # a well-formed grid: counted, not named
    return (edit.key,)                               # the key that is missing or malformed


def mutants(ctx):
    answer = ctx.answer()
    alternatives = {f"qos.{pod}": [c for c in CLASSES if c != value] + [value.lower()]
                    for pod, value in answer["qos"].items()}
    yield from answer_mutants(answer, alternatives=alternatives, names=_names)
    extra = copy.deepcopy(answer)
    extra["qos"]["worker"] = "BestEffort"
    yield Mutant("add:qos.worker", "answer: a Pod that is not in the file added", names=("worker", "no such Pod"),
                 answer=extra)
