"""One constraint over the zone label, maxSkew 1, DoNotSchedule, selecting app=shop (cart shares
tier=frontend with shop's Pods, so tier would count cart too). Recreate replaces the six replicas:
zone-c-1 (1.5 CPUs) holds one, so zone-a and zone-b may hold two each (1 + maxSkew), and the
sixth fits nowhere: zone-a-1, zone-a-2 and zone-b-1 fail PodTopologySpread (2 + 1 - 1 > 1), zone-c-1
fails NodeResourcesFit first (Insufficient cpu)."""

import json

from labkit.apiserver.target import for_env
from labkit.exercises import write_answer

CONSTRAINT = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "shop"}}}
SPREAD = "node(s) didn't match pod topology spread constraints"


def constrain(env, constraint):
    for_env(env).kubectl("patch", "deployment", "shop", "-n", "sched", "--type=json", "-p", json.dumps(
        [{"op": "add", "path": "/spec/template/spec/topologySpreadConstraints", "value": [constraint]}]))


def solve(env):
    constrain(env, CONSTRAINT)
    write_answer(env, "spread", {"zones": {"zone-a": 2, "zone-b": 2, "zone-c": 1},
                                 "nodes": {"zone-a-1": SPREAD, "zone-a-2": SPREAD, "zone-b-1": SPREAD,
                                           "zone-c-1": "Insufficient cpu"}})
