"""Near-misses of the audit answer: the key dropped; the user swapped for each other person of
the team (the one who read it, changed it, deleted the other namespace's ConfigMap), the lab's
admin, a service account; the name cut short or in capitals."""

from labkit.mutants import answer_mutants


def mutants(ctx):
    lab = ctx.env.lab.environment_module()
    answer = ctx.answer()
    user = answer["user"]
    others = [p for p in lab.PEOPLE if p != user] + ["labkit-admin", "system:serviceaccount:shop:reporter",
                                                      user.capitalize(), user[:-1], ""]
    yield from answer_mutants(answer, alternatives={"user": others},
                              names=lambda edit: ("user",) if edit.op == "drop" else ("delete",))
