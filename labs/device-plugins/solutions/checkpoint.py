"""Reference solution.

kubelet restores every entry of its checkpoint when it starts (manager.go readCheckpoint): train
keeps widget-0 and widget-1 — widget-1 turning Unhealthy takes nothing from a running Pod — and
prep keeps widget-3, which its init container fetch and its container main share. infer ended
while kubelet was down: before kubelet allocates for next it drops the allocations of Pods no
longer active (UpdateAllocatedDevices), so widget-2 is free again, and it is the one healthy widget
no active Pod holds: next gets it (devicesToAllocate).
"""

import yaml

from labkit.exercises import answer_path

HELD = {"train": ["widget-0", "widget-1"], "prep": ["widget-3"], "next": ["widget-2"]}


def solve(env):
    path = answer_path(env.lab.id, "checkpoint")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"held": HELD}))
