"""Near-misses of the conditions answer: each count one more, one less, doubled or zero; each
entry dropped; each key written another way (without the trailing dot of the core group, with its
version, singular); one entry more (an object the namespace held before the DELETE).

A key whose form no condition writes is named in the failure; any other wrong entry or count is
neither named nor counted (README, "Predictions"): its failure must say that the answer is not
right and where to look, the conditions."""

from labkit.mutants import Mutant, answer_mutants


def _renamed(key: str) -> list[str]:
    resource, _, group = key.partition(".")
    out = {resource, f"{resource}.v1" if not group else f"{resource}.{group}.v1", key.rstrip(".") + "s."}
    if resource.endswith("s"):
        out.add(f"{resource[:-1]}.{group}")
    return sorted(out - {key})


GRID = ("not right", "entries", "NamespaceContentRemaining", "NamespaceFinalizersRemaining")


def _names(edit):
    """A mapping dropped is a malformed answer that names it; an entry changed, the grid's words."""
    return (edit.path,) if edit.path in ("remaining", "finalizers") else GRID


def mutants(ctx):
    answer = ctx.answer()
    form_problems = ctx.lab._load("checks.py")._key_form_problems
    yield from answer_mutants(answer, names=_names)
    for part in ("remaining", "finalizers"):
        for key, count in answer[part].items():
            for other in _renamed(key) if part == "remaining" else [key.rsplit("/", 1)[0], key + "s"]:
                changed = {**answer, part: {(other if k == key else k): v for k, v in answer[part].items()}}
                yield Mutant(f"rename:{part}.{key}={other}", f"answer: {part} key {key} written as {other}",
                             names=(part, other) if form_problems({other: count}, part) else GRID, answer=changed)
        extra = "configmaps." if part == "remaining" else "kubernetes"
        if extra not in answer[part]:
            yield Mutant(f"add:{part}.{extra}", f"answer: {part} gets {extra}: 1 too", names=GRID,
                         answer={**answer, part: {**answer[part], extra: 1}})
