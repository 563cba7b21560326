"""PreferNoSchedule: TaintToleration's Filter looks only at NoSchedule and NoExecute taints, so
node-f still fits when no other node does; its Score counts the untolerated PreferNoSchedule
taints and normalises in reverse, so node-f scores 0 where the others score 100 (weight 3).
legacy stays: only NoExecute taints evict."""

from labkit.apiserver.target import for_env


def solve(env):
    for_env(env).kubectl("taint", "node", "node-f", "retiring=true:PreferNoSchedule")
