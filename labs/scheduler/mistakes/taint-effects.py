"""Common wrong ways to retire node-f."""

from labkit.apiserver.target import for_env
from labkit.exercises import mistake


@mistake("NoSchedule", "even when no other node fits")
def no_schedule(env):
    """Taints node-f NoSchedule: new Pods can no longer land there at all."""
    for_env(env).kubectl("taint", "node", "node-f", "retiring=true:NoSchedule")


@mistake("NoExecute", "legacy")
def no_execute(env):
    """Taints node-f NoExecute: legacy would be evicted."""
    for_env(env).kubectl("taint", "node", "node-f", "retiring=true:NoExecute")


@mistake("cordoned")
def cordon(env):
    """Cordons node-f (spec.unschedulable) instead of tainting it."""
    for_env(env).kubectl("cordon", "node-f")


@mistake("node-e", "changed")
def wrong_node(env):
    """Taints node-e, the other hdd node, by mistake."""
    for_env(env).kubectl("taint", "node", "node-e", "retiring=true:PreferNoSchedule")
