"""Near-misses of the conditions answer: each count one more, one less, doubled or zero; each
entry dropped; each key written another way (without the trailing dot of the core group, with its
version, singular); one entry more (an object the namespace held before the DELETE)."""

from labkit.mutants import Mutant, answer_mutants


def _renamed(key: str) -> list[str]:
    resource, _, group = key.partition(".")
    out = {resource, f"{resource}.v1" if not group else f"{resource}.{group}.v1", key.rstrip(".") + "s."}
    if resource.endswith("s"):
        out.add(f"{resource[:-1]}.{group}")
    return sorted(out - {key})


def mutants(ctx):
    answer = ctx.answer()
    yield from answer_mutants(answer, names=lambda edit: (edit.path.split(".", 1)[0],))
    for part in ("remaining", "finalizers"):
        for key, count in answer[part].items():
            for other in _renamed(key) if part == "remaining" else [key.rsplit("/", 1)[0], key + "s"]:
                changed = {**answer, part: {(other if k == key else k): v for k, v in answer[part].items()}}
                yield Mutant(f"rename:{part}.{key}={other}", f"answer: {part} key {key} written as {other}",
                             names=(part, other), answer=changed)
        extra = "configmaps." if part == "remaining" else "kubernetes"
        if extra not in answer[part]:
            yield Mutant(f"add:{part}.{extra}", f"answer: {part} gets {extra}: 1 too", names=(part, extra),
                         answer={**answer, part: {**answer[part], extra: 1}})
