"""Near-misses of the e2e matrix: each party's list with one mount left out, one added, one
swapped for another, the items in the other order, a party left out (the answer's 25 cells, one
or two at a time). Judged by the real check on the answer file."""

from labkit.mutants import Mutant, tree_edits

PARTIES = ("host", "master", "slave", "private", "default")


def mutants(ctx):
    answer = ctx.answer()
    reference = {party: set(answer[party]) for party in PARTIES}
    items = {f"{party}[]": list(PARTIES) for party in PARTIES}
    edits = list(tree_edits(answer, alternatives=items))
    for party in PARTIES:              # widen: one mount more
        for mount in PARTIES:
            if mount not in reference[party]:
                changed = {**answer, party: [*answer[party], mount]}
                edits.append(("add-item", f"{party}+{mount}", f"{party}: {mount} added", changed))
    for edit in edits:
        if isinstance(edit, tuple):
            op, path, change, value = edit
        else:
            op, path, change, value = edit.op, edit.path + (f"={edit.after}" if edit.op == "set" else ""), edit.describe(), edit.value
        missing = [p for p in PARTIES if p not in value]
        if missing:
            yield Mutant(f"{op}:{path}", f"answer: {change}", names=(missing[0],), answer=value)
            continue
        wrong = sum(1 for p in PARTIES for m in PARTIES if (m in value[p]) != (m in reference[p]))
        if wrong == 0:
            yield Mutant(f"{op}:{path}", f"answer: {change}", answer=value,
                         equivalent="the check compares each party's list as a set: order and repeats do not matter")
        else:
            yield Mutant(f"{op}:{path}", f"answer: {change}", names=("prediction is not right",), answer=value)
