"""Near-misses of the peer groups read from mountinfo: each party's fields left out, emptied, cut
short, swapped for another party's, for `private`, or for a neighbouring group number. Judged by
the real check on the answer file."""

from labkit.mutants import Mutant, tree_edits


def mutants(ctx):
    answer = ctx.answer()
    values = sorted(set(answer.values()))
    numbers = sorted({int(item.split(":")[1]) for v in values for item in v.split() if ":" in item})
    near = [f"shared:{n + 1}" for n in numbers] + [f"master:{n + 1}" for n in numbers] + \
        [f"shared:{n} master:{n}" for n in numbers] + ["private"] + values
    near = list(dict.fromkeys(near))
    alternatives = {key: near for key in answer}
    for edit in tree_edits(answer, alternatives=alternatives):
        value = edit.value
        name = f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else "")
        if edit.op == "drop":
            yield Mutant(name, f"answer: {edit.describe()}", names=(edit.key,), answer=value)
            continue
        text = (value[edit.key] or "").strip()
        if not text:
            names = ("empty",)
        elif text != "private" and not all(i.partition(":")[0] in ("shared", "master", "propagate_from")
                                           and i.partition(":")[2].isdigit() for i in text.split()):
            names = (edit.key,)
        else:
            names = ("findings are not right",)
        yield Mutant(name, f"answer: {edit.describe()}", names=names, answer=value)
