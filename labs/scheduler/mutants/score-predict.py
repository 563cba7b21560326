"""Near-misses of the score-predict prediction: the node swapped for each other node or cut, each
node's NodeResourcesFit score one more, one less, doubled, zero or out of range, each entry
dropped, a node that is not in the case added."""

from labkit.mutants import Mutant, answer_mutants


def mutants(ctx):
    answer = ctx.answer()
    nodes = sorted(answer["fit"])
    alternatives = {"node": [n for n in nodes if n != answer["node"]] + [answer["node"][:-1]]}
    for node, score in answer["fit"].items():
        alternatives[f"fit.{node}"] = sorted({score + 1, score - 1, score * 2, 0, 101, -1} - {score})

    def names(edit):
        if edit.op == "drop":
            return (edit.key,)
        if edit.path == "node" and edit.after not in nodes:
            return ("node",)
        if edit.path.startswith("fit.") and not 0 <= edit.after <= 100:
            return ("fit", "0 to 100")
        return ("prediction is not right",)
    yield from answer_mutants(answer, alternatives=alternatives, names=names)
    yield Mutant("extra-node", "answer: a node that is not in the case added", names=("fit", "not a node"),
                 answer={**answer, "fit": {**answer["fit"], "node-4": 50}})
