"""Near-misses of the predict-dangling answer: each key dropped, each fate flipped or misspelt,
the owners of `shared` with one dropped, another added or swapped for the ghost, the event reason
cut, emptied or replaced by none."""

from labkit.mutants import Mutant, answer_mutants

FATES = ("deleted", "kept")


def mutants(ctx):
    answer = ctx.answer()
    fates = {k: [f for f in FATES if f != answer[k]] + [answer[k][:-1]] for k in ("orphan", "shared", "stranger")}
    event = answer["stranger_event"]
    alternatives = {**fates, "shared_owners[]": ["ghost", "anchor-b", ""],
                    "stranger_event": ["none", event[:-1], "OwnerRefNotFound"]}

    def names(edit):
        if edit.op == "drop" or (edit.path in fates and edit.after not in FATES):
            return (edit.key,)
        return ("of its 5 parts",)
    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    yield Mutant("add-item:shared_owners", "answer: the ghost added to shared's owners", names=("of its 5 parts",),
                 answer={**answer, "shared_owners": [*answer["shared_owners"], "ghost"]})
