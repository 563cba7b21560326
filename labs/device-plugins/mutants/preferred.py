"""Near-misses of the reference plugin's preferred allocations: each answer with an ID left out,
changed to another widget or swapped; the option that offers GetPreferredAllocation off; the Pod's
devices changed; kubelet's call gone. Whether a changed answer still keeps the exercise's rules
(allocation_size distinct available IDs, every must_include one, one NUMA node where possible)
is decided by those rules themselves (checks.answer_problem); those that do are equivalent."""


import dataclasses


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    obs = checks.observe_preferred(ctx)
    words = [(r"options(\.get_preferred_allocation_available)?", ("get_preferred_allocation_available",)),
             (r"answers(\[\])?", ("not every",)),
             (r"pod(\.kubelet_called)?", ("did not call",)),
             (r"pod\.devices.*", ("one NUMA node",)),
             (r"answers\[\]\.answer(\[\])?", ("allocation_size",))]

    def equivalent(edit):
        import re
        if edit.path == "options.pre_start_required":
            return ("PreStartContainer is called only before a container starts; this exercise starts none, and "
                    "the plugin answers it with an empty response either way")
        if edit.op == "swap" and edit.path == "answers":
            return "each answer is judged with the request it answered: the order of the check's requests does not matter"
        if edit.op == "swap" and re.fullmatch(r"(answers\[\d+\]\.answer|pod\.devices)", edit.path):
            return "kubelet takes the preferred IDs as a set: their order does not matter"
        m = re.fullmatch(r"answers\[(\d+)\]\.answer(\[\d+\])?", edit.path)
        if m:
            seen = edit.value["answers"][int(m.group(1))]
            if checks.answer_problem(seen["available"], seen["must_include"], seen["size"], seen.get("answer")) is None:
                return "the changed answer still keeps every rule of the exercise (checks.answer_problem)"
        return None

    for mutant in checks.observation_mutants(ctx.exercise.id, obs, words, equivalent=equivalent,
                                             skip=(r"answers\[\]\.(available|must_include|size)(\[\])?",)):
        if mutant.names == ("allocation_size",):
            import re
            m = re.match(r"[\w-]+:answers\[(\d+)\]", mutant.name)
            seen = mutant.observation["answers"][int(m.group(1))]
            problem = checks.answer_problem(seen["available"], seen["must_include"], seen["size"], seen.get("answer"))
            mutant = dataclasses.replace(mutant, names=(problem[0],))
        yield mutant
