"""Near-misses of the eviction-order reference: the prediction with a Pod left out, a Pod named
twice, a typo, and each pair of neighbours swapped (answer file); and the watching left out or
done before the Pods held their memory (observation). What a wrong order must be told is decided
by the reconstruction of kubelet's ranking (checks.reconstructed_ranking)."""

from labkit.mutants import Mutant, answer_mutants


def _words(checks, pods, truth, order):
    if sorted(order) != sorted(pods):
        return ("order",)
    if order in checks._qos_orders(pods):
        return ("QoS class",)
    if order == checks._without_priority(pods, truth):
        return ("ignores priority",)
    return ("places", "not right")


def _forget_watching(env):
    from labkit.resources.node import lab_nodes
    (lab_nodes(env)[env.lab.exercise("eviction-order").params["node"]].dir / "eviction.json").unlink()


def mutants(ctx):
    p = ctx.params
    checks = ctx.lab._load("checks.py")
    pods = checks._pristine(p["file"], p["node"])
    truth = checks.reconstructed_ranking(p["file"], p["node"])
    answer = ctx.answer()
    order = list(answer["order"])

    def names(edit):
        return _words(checks, pods, truth, [str(n) for n in edit.value.get("order", [])]) \
            if isinstance(edit.value.get("order"), list) else ("order",)

    yield from answer_mutants(answer, names=names, alternatives={"order[]": [n for n in pods] + [""]})
    for i in range(1, len(order) - 1):       # the first pair is tree_edits' swap
        swapped = order[:i] + [order[i + 1], order[i]] + order[i + 2:]
        yield Mutant(f"swap:order[{i}]", f"answer: places {i + 1} and {i + 2} swapped",
                     names=_words(checks, pods, truth, swapped), answer={"order": swapped})
    observation = checks.observe_eviction_order(ctx)
    yield Mutant("not-watched", "the eviction manager never ran on the Pods", names=("not watched",),
                 observation={**observation, "ranking": None}, apply=_forget_watching)
    early = list(reversed(observation["ranking"]))
    yield Mutant("watched-early", "the eviction manager ranked the Pods before they held their memory",
                 names=("before they held",), observation={**observation, "ranking": early})
    changed = {**observation["specs"]}
    first = sorted(changed)[0]
    changed[first] = {**changed[first], "priorityClassName": "high-priority"}
    yield Mutant("watched-changed-pods", f"{first} run with another priority class, watched",
                 names=("not watched these Pods", "otherwise than the lab's file"),
                 observation={"specs": changed, "ranking": early})
