"""Near-misses of the preempt-predict prediction: the node swapped for the other or cut; each
victim dropped, or swapped for each other Pod of the case (on the same node, on the other, or no
Pod); a Pod of the node added; the victims' order swapped (equivalent: the victims are a set)."""

from labkit.mutants import Mutant, answer_mutants
from labkit.scheduler.play import load_case


def mutants(ctx):
    answer = ctx.answer()
    case = load_case(ctx.lab.directory / ctx.params["case"])
    on = {p["name"]: p["nodeName"] for p in case["pods"]}
    nodes = [n["name"] for n in case["nodes"]]
    alternatives = {"node": [n for n in nodes if n != answer["node"]] + [answer["node"][:-1]],
                    "victims[]": [p for p in on if p not in answer["victims"]] + ["urgent"]}

    def names(edit):
        if edit.op == "swap":
            return ()
        if edit.op == "drop":
            return (edit.key,)
        if edit.path == "node" and edit.after not in nodes:
            return ("node",)
        if edit.path == "node" or (edit.op == "set" and edit.after in on and on[edit.after] != answer["node"]):
            return ("victims",) if edit.path != "node" else ("do not run on",)
        if edit.op == "set" and edit.after not in on:
            return ("victims", "not a Pod")
        return ("prediction is not right",)
    for m in answer_mutants(answer, alternatives=alternatives, names=names):
        if m.name.startswith("swap:"):
            yield Mutant(m.name, m.change, answer=m.answer, equivalent="the victims are a set: the check compares "
                                                                      "them sorted, as DefaultPreemption's are unordered")
        else:
            yield m
    extra = next(p for p, n in on.items() if n == answer["node"] and p not in answer["victims"])
    yield Mutant("add-victim", f"answer: {extra} added to the victims", names=("prediction is not right",),
                 answer={**answer, "victims": [*answer["victims"], extra]})
