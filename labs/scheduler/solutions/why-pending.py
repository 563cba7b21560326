"""The FailedScheduling message names four reasons: too little CPU (node-c), a selector that does
not match (node-b, node-e) and two untolerated taints (node-a's dedicated=batch, node-d's
maintenance=true). Only the team's taint may be tolerated: one toleration for it, added to the
Pod (appended: a Pod's tolerations may only grow, and it has DefaultTolerationSeconds' two
already), and the scheduler binds it to node-a."""

import json

from labkit.apiserver.target import for_env

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}


def solve(env):
    for_env(env).kubectl("patch", "pod", "web", "-n", "sched", "--type=json", "-p",
                         json.dumps([{"op": "add", "path": "/spec/tolerations/-", "value": TOLERATION}]))
