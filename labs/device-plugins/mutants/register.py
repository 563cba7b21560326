"""Near-misses of what kubelet saw of the reference plugin: each field of the registration (its
ListAndWatch stream's fate included) and of every listed device dropped or changed (IDs, health,
NUMA node), devices left out or reordered, the node's capacity and allocatable changed — in the
first list and at the end of the watch (`last`) — one at a time, judged by the check's own judge."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_register(ctx), [(r"last", ("device IDs",))])
