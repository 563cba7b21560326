"""Near-misses of what kubelet saw of the reference plugin while a widget broke and healed: the
registration and each device list (before, broken, healed, two others broken, healed) edited one field at a time, the new
list not sent, the node's capacity and allocatable changed in each phase."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    words = [(r"(broken|healed|others_broken|others_healed)(\.sent)?", ("no new device list",))]
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_health(ctx), words)
