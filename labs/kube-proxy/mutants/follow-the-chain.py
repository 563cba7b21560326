"""Near-misses of the follow-the-chain answer: the chain name dropped, cut short, emptied, or
catalog's chain (which leads to the same pods); each probability dropped, swapped with its
neighbour, rounded (2 and 5 digits), moved just outside the ±1e-6 tolerance, or zeroed. A
probability moved by less than the tolerance is proven equivalent (the exercise's own tolerance)."""

from labkit.kubeproxy.chains import service_chain, service_port_name
from labkit.mutants import Mutant, tree_edits


def mutants(ctx):
    answer = ctx.answer()
    tolerance = ctx.lab._load("checks.py").TOLERANCE
    chain = answer["chain"]
    other = service_chain(service_port_name("default", "catalog", "http"), "tcp")
    alternatives = {"chain": [other, chain[:-1], "", chain.lower()]}
    for i, p in enumerate(answer["probabilities"]):
        alternatives[f"probabilities[{i}]"] = sorted({round(p, 2), round(p, 5), p + 3 * tolerance, p - 3 * tolerance,
                                                      p + tolerance / 2, 0.0} - {p})
    for edit in tree_edits(answer, alternatives=alternatives):
        inside = (edit.op == "set" and edit.path.startswith("probabilities[")
                  and abs(float(edit.after) - float(edit.before)) <= tolerance)
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"answer: {edit.describe()}",
                     names=("chain",) if edit.path.startswith("chain") else ("probabilit",),
                     answer=edit.value,
                     equivalent="within the ±1e-6 tolerance the exercise states" if inside else None)
