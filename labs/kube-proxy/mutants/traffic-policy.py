"""Near-misses of the traffic-policy prediction: every cell flipped (answers, client_ip_preserved),
every entry, node and Service dropped. Leaving client_ip_preserved out where the node does not
answer is what the answer format allows (the reference already does)."""

from labkit.mutants import Mutant, tree_edits


def mutants(ctx):
    answer = ctx.answer()
    for edit in tree_edits(answer):
        if edit.op == "drop" and edit.key in ("answers", "client_ip_preserved"):
            names = (edit.key,)
        elif edit.op == "drop" and edit.path.count(".") == 1:        # a node
            names = ("answers",)
        elif edit.op == "drop":                                       # a Service
            names = (edit.key,)
        elif edit.key == "answers" and edit.after is True and "client_ip_preserved" not in \
                edit.value[edit.path.split(".")[0]][edit.path.split(".")[1]]:
            names = ("client_ip_preserved",)        # an answer predicted needs the address too
        else:
            names = ("wrong",)
        yield Mutant(f"{edit.op}:{edit.path}" + (f"={edit.after}" if edit.op == "set" else ""),
                     f"prediction: {edit.describe()}", names=names, answer=edit.value)
