"""Near-misses of what the node showed across a kubelet restart with the reference plugin: no
re-registration, the node's capacity or allocatable changed afterwards, the Pod's widgets before
or after changed, the later Pod given a held widget or too few — one at a time."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    words = [(r"restart(\.registered_again)?", ("register again",)),
             (r"restart\.node.*", ("capacity",)),
             (r"restart\.held_(before|after).*", ("checkpoint",)),
             (r"restart\.later_pod.*", ("nobody held",))]

    def equivalent(edit):
        if edit.op == "swap" and edit.path in ("restart.held_before", "restart.held_after", "restart.later_pod"):
            return "which widgets a Pod holds is a set: their order does not matter"
        if edit.path == "restart.errors":
            return "kubelet refused nothing: no errors, dropped or empty, the same"
        return None
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_restart(ctx), words, equivalent=equivalent)
