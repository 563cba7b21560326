"""Near-misses of the checkpoint reference answer: every Pod left out, every widget changed to
another of the node's widgets (or to nothing), dropped or added, the order of a Pod's widgets
swapped (equivalent: a Pod holds a set of devices), and `held:` itself dropped. What a wrong
answer must be told is decided by labkit's reconstruction of the device manager
(checks.reconstructed_held): the mutants are checked as a first check is, before `labkit devices
play` has shown the outcome, so a well-formed wrong prediction is told only that it is not right
(checks.judge_checkpoint); one that is not a prediction of the scenario's Pods (a widget named
twice, `held:` gone) is told what is malformed."""

from labkit.exercises import CheckFailed
from labkit.mutants import Mutant, answer_mutants

WIDGETS = ["widget-0", "widget-1", "widget-2", "widget-3"]
ORDER_ONLY = ("kubelet keeps a container's devices as a set (podDevices): the order a Pod's widgets are written in "
              "does not matter")
NOT_RIGHT = ("prediction", "not right")


def mutants(ctx):
    checks = ctx.lab._load("checks.py")
    answer = ctx.answer()
    pods = sorted(answer["held"])

    def names(edit) -> tuple:
        try:
            checks._held_answer(edit.value)
        except CheckFailed:
            return (edit.key,)              # malformed: named at once
        return NOT_RIGHT

    alternatives = {f"held.{pod}[]": [w for w in WIDGETS] + [""] for pod in pods}
    for m in answer_mutants(answer, alternatives=alternatives, names=names):
        if m.name.startswith("swap:"):
            yield Mutant(m.name, m.change, equivalent=ORDER_ONLY, answer=m.answer)
        else:
            yield m
    for pod in pods:
        for widget in WIDGETS:
            if widget not in answer["held"][pod]:
                grown = {"held": {**answer["held"], pod: sorted(answer["held"][pod] + [widget])}}
                yield Mutant(f"add:held.{pod}={widget}", f"answer: {widget} added to {pod}", names=NOT_RIGHT,
                             answer=grown)
