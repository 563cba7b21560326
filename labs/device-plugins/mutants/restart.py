"""Near-misses of what the node showed across kubelet's two restarts with the reference plugin: a
restart not answered (the first or the second), or answered without a device list, each field of
kubelet's record of the Register calls before, between and after the restarts changed (a stream
ended, replaced, left open, closed),
the node's capacity or allocatable changed after a restart, the Pod's widgets before or after a
restart changed, the later Pod given a held widget or too few — one at a time."""


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    words = [(r"restarts(\[\])?", ("after kubelet's",)),
             (r"restarts\[\]\.registered_again", ("register again",)),
             (r"restarts\[\]\.listed", ("no device list",)),
             (r"restarts\[\]\.node.*", ("capacity",)),
             (r"held_before.*", ("checkpoint",)),
             (r"restarts\[\]\.held_after.*", ("checkpoint",)),
             (r"later_pod.*", ("nobody held",)),
             (r"restarts\[\]\.registrations(\[\])?", ("register again",)),
             (r"restarts\[\]\.registrations\[\]\.resource", ("resource",)),
             (r"restarts\[\]\.registrations\[\]\.version", ("version",)),
             (r"restarts\[\]\.registrations\[\]\.error", ("refused",)),
             (r"restarts\[\]\.registrations\[\]\.stream", ("after kubelet's", "ListAndWatch"))]
    alternatives = {"restarts[].registrations[].error": ['the ResourceName "widget" is invalid'],
                    "restarts[].registrations[].version": ["v1alpha1", "v1"],
                    "restarts[].registrations[].stream": checks.STREAMS}

    def equivalent(edit):
        import re
        if edit.op == "swap" and re.fullmatch(r"held_before|restarts\[\d+\]\.held_after|later_pod", edit.path):
            return "which widgets a Pod holds is a set: their order does not matter"
        return None
    yield from checks.observation_mutants(ctx.exercise.id, checks.observe_restart(ctx), words, equivalent=equivalent,
                                          alternatives=alternatives)
