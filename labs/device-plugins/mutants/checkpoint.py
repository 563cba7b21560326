"""Near-misses of the checkpoint reference answer: every Pod left out, every widget changed to
another of the node's widgets (or to nothing), dropped or added, the order of a Pod's widgets
swapped (equivalent: a Pod holds a set of devices), and `held:` itself dropped. What a wrong
answer must be told is decided by labkit's reconstruction of the device manager
(checks.reconstructed_held)."""

from labkit.mutants import Mutant, answer_mutants

WIDGETS = ["widget-0", "widget-1", "widget-2", "widget-3"]
ORDER_ONLY = ("kubelet keeps a container's devices as a set (podDevices): the order a Pod's widgets are written in "
              "does not matter")


def mutants(ctx):
    answer = ctx.answer()
    pods = sorted(answer["held"])
    alternatives = {f"held.{pod}[]": [w for w in WIDGETS] + [""] for pod in pods}
    for m in answer_mutants(answer, alternatives=alternatives, names=lambda e: (e.key,)):
        if m.name.startswith("swap:"):
            yield Mutant(m.name, m.change, equivalent=ORDER_ONLY, answer=m.answer)
        else:
            yield m
    for pod in pods:
        for widget in WIDGETS:
            if widget not in answer["held"][pod]:
                grown = {"held": {**answer["held"], pod: sorted(answer["held"][pod] + [widget])}}
                yield Mutant(f"add:held.{pod}={widget}", f"answer: {widget} added to {pod}", names=(pod,),
                             answer=grown)
