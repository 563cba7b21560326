"""Near-misses of what the node showed across a kubelet restart with the reference plugin: no
re-registration, each field of kubelet's record of the Register calls before and after the
restart changed (a stream ended, replaced, left open), the node's capacity or allocatable changed
afterwards, the Pod's widgets before or after changed, the later Pod given a held widget or too
few — one at a time."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    words = [(r"restart(\.registered_again)?", ("register again",)),
             (r"restart\.node.*", ("capacity",)),
             (r"restart\.held_(before|after).*", ("checkpoint",)),
             (r"restart\.later_pod.*", ("nobody held",)),
             (r"restart\.registrations(\[\])?", ("register again",)),
             (r"restart\.registrations\[\]\.resource", ("resource",)),
             (r"restart\.registrations\[\]\.version", ("version",)),
             (r"restart\.registrations\[\]\.error", ("refused",)),
             (r"restart\.registrations\[\]\.stream", ("after kubelet's restart", "ListAndWatch"))]
    alternatives = {"restart.registrations[].error": ['the ResourceName "widget" is invalid'],
                    "restart.registrations[].version": ["v1alpha1", "v1"],
                    "restart.registrations[].stream": checks.STREAMS}

    def equivalent(edit):
        if edit.op == "swap" and edit.path in ("restart.held_before", "restart.held_after", "restart.later_pod"):
            return "which widgets a Pod holds is a set: their order does not matter"
        return None
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_restart(ctx), words, equivalent=equivalent,
                                          alternatives=alternatives)
