"""Near-misses of the qos reference answer: each Pod's class replaced by each other class, cut
short, emptied or left out; each container's oom_score_adj one off, doubled, zero, or replaced by
the other values kubelet uses (-997, -998 of older kubelets, 999, 1000), or left out."""

from labkit.mutants import answer_mutants

CLASSES = ["Guaranteed", "Burstable", "BestEffort"]


def mutants(ctx):
    answer = ctx.answer()
    alternatives = {f"qos.{name}": [c for c in CLASSES if c != value] + [value[:-1], ""]
                    for name, value in answer["qos"].items()}
    for key, value in answer["oom_score_adj"].items():
        alternatives[f"oom_score_adj.{key}"] = sorted({value + 1, value - 1, value * 2, 0, -997, -998, 999, 1000} - {value})

    def names(edit):
        return ("qos",) if edit.path.startswith("qos") else ("oom_score_adj",)

    yield from answer_mutants(answer, alternatives=alternatives, names=names)
