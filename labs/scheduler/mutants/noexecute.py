"""Near-misses of the noexecute prediction: each Pod's entry dropped, or set to each other
outcome the six Pods can have (0, 120, 300, never), to a neighbour number, or to something that is
no outcome."""

from labkit.mutants import Mutant, answer_mutants

OUTCOMES = (0, 120, 300, "never")


def mutants(ctx):
    answer = ctx.answer()
    alternatives = {name: [v for v in (*OUTCOMES, 30, "soon") if v != value] for name, value in answer.items()}

    def names(edit):
        if edit.op == "drop" or edit.after == "soon":
            return (edit.key,)
        return ("prediction is not right",)
    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    yield Mutant("extra-pod", "answer: a Pod that is not on the node added", names=("not a Pod",),
                 answer={**answer, "web": 0})
