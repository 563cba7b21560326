"""Near-misses of the force-finalize answer: each left-behind object dropped, its name cut short
or emptied, written without its group; one object more (the new namespace's own ServiceAccount
and root CA ConfigMap, made after the force-finalize); visible_again flipped; the list reordered
(equivalent: it is a set of objects, compared sorted)."""

from labkit.mutants import Mutant, answer_mutants


def _names(edit):
    """The part changed, but not visible_again flipped: a true/false is not named while the answer
    can earn points (README, "Predictions"); its failure says where to look."""
    if edit.path == "visible_again" and edit.op == "set":
        return ("not right", "what a client sees in the new namespace")
    return (edit.path.split(".", 1)[0].split("[", 1)[0],)


def mutants(ctx):
    answer = ctx.answer()
    left = answer["left_behind"]
    for m in answer_mutants(answer, names=_names):
        if m.name.startswith("swap:"):
            yield Mutant(m.name, m.change, answer=m.answer,
                         equivalent="left_behind is a set of objects: the check compares it sorted")
        else:
            yield m
    for i, entry in enumerate(left):
        resource, _, name = entry.partition("/")
        if "." in resource:
            short = f"{resource.split('.', 1)[0]}/{name}"
            yield Mutant(f"ungrouped:{entry}", f"answer: {entry} written as {short}", names=("left_behind", short),
                         answer={**answer, "left_behind": left[:i] + [short] + left[i + 1:]})
    for extra in ("serviceaccounts/default", "configmaps/kube-root-ca.crt"):
        if extra not in left:
            yield Mutant(f"add:{extra}", f"answer: {extra} of the new namespace listed too",
                         names=("left_behind", extra), answer={**answer, "left_behind": sorted(left + [extra])})
