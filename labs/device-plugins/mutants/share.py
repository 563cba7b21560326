"""Near-misses of what kubelet saw of the reference vcore plugin: the registration and each of the
16 vcores (IDs, health, NUMA node), the node's capacity and allocatable, the option that offers
GetPreferredAllocation, each preferred answer with an ID left out, cut short or swapped, each
Allocate answer's WIDGET_VISIBLE_DEVICES, each Pod's admission, vcores and environment — one at a
time. Whether a changed preferred answer still keeps the exercise's rules (allocation_size distinct
available IDs, every must_include one, on one widget best fit where one has room) is decided by
those rules themselves (checks.share_problem); those that do are equivalent."""

import dataclasses
import re


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    env = ctx.params["env"]
    obs = checks.observe_share(ctx)
    words = [(r"options(\.get_preferred_allocation_available)?", ("get_preferred_allocation_available",)),
             (r"answers(\[\])?", ("not every",)),
             (r"answers\[\]\.answer(\[\])?", ("allocation_size",)),      # replaced by share_problem's word below
             (r"allocates(\[\])?", ("not every",)),
             (r"allocates\[\]\.envs.*", (env,)),
             (r"pods(\[\])?(\.name|\.admitted)?", ("did not admit",)),
             (r"pods\[\]\.devices(\[\])?", ("did not get",)),
             (r"pods\[\]\.envs.*", (env,))]

    def equivalent(edit):
        if edit.path == "options.pre_start_required":
            return ("PreStartContainer is called only before a container starts; this check starts none, and the "
                    "plugin answers it with an empty response either way")
        if edit.op == "swap" and edit.path in ("answers", "allocates"):
            return "each answer is judged with the request it answered: the order of the check's requests does not matter"
        if edit.op == "swap" and re.fullmatch(r"(answers\[\d+\]\.answer|pods\[\d+\]\.devices)", edit.path):
            return "kubelet takes the preferred IDs, and holds a container's devices, as a set: their order does not matter"
        if edit.op == "drop" and re.fullmatch(r"pods\[\d+\]\.error", edit.path):
            return "an admitted Pod has no admission error: dropped or null, the same"
        m = re.fullmatch(r"answers\[(\d+)\]\.answer(\[\d+\])?", edit.path)
        if m:
            seen = edit.value["answers"][int(m.group(1))]
            if checks.share_problem(seen["available"], seen["must_include"], seen["size"], seen.get("answer")) is None:
                return "the changed answer still keeps every rule of the exercise (checks.share_problem)"
        return None

    for mutant in checks.observation_mutants(
            ctx.exercise.id, obs, words, equivalent=equivalent, resource=ctx.params["resource"], socket="vcore.sock",
            skip=(r"answers\[\]\.(available|must_include|size)(\[\])?", r"allocates\[\]\.devices(\[\])?",
                  r"pods\[\]\.size")):
        m = re.match(r"[\w-]+:answers\[(\d+)\]\.answer", mutant.name)
        if m and mutant.equivalent is None:
            seen = mutant.observation["answers"][int(m.group(1))]
            problem = checks.share_problem(seen["available"], seen["must_include"], seen["size"], seen.get("answer"))
            mutant = dataclasses.replace(mutant, names=(problem[0],))
        yield mutant
