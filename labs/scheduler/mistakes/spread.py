"""Common wrong solutions of spread: each a constraint a student would plausibly write, or a
right constraint with a misread explanation."""

import copy
import json

from labkit.apiserver.target import for_env
from labkit.exercises import mistake, write_answer

RIGHT = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "shop"}}}
SPREAD = "node(s) didn't match pod topology spread constraints"
RIGHT_ANSWER = {"zones": {"zone-a": 2, "zone-b": 2, "zone-c": 1},
                "nodes": {"zone-a-1": SPREAD, "zone-a-2": SPREAD, "zone-b-1": SPREAD, "zone-c-1": "Insufficient cpu"}}


def _constrain(env, **changes):
    constraint = {**copy.deepcopy(RIGHT), **changes}
    for_env(env).kubectl("patch", "deployment", "shop", "-n", "sched", "--type=json", "-p", json.dumps(
        [{"op": "add", "path": "/spec/template/spec/topologySpreadConstraints", "value": [constraint]}]))


@mistake("labelSelector", "not shop's")
def selects_the_tier(env):
    """Selects tier=frontend, the label shop's Pods share with cart: cart is counted in zone-a."""
    _constrain(env, labelSelector={"matchLabels": {"tier": "frontend"}})
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("topologyKey")
def spreads_over_hostnames(env):
    """Spreads over kubernetes.io/hostname: one replica per node at most one apart, not per zone."""
    _constrain(env, topologyKey="kubernetes.io/hostname")
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("whenUnsatisfiable", "ScheduleAnyway")
def only_prefers(env):
    """whenUnsatisfiable ScheduleAnyway: the constraint is only scored, every replica is placed."""
    _constrain(env, whenUnsatisfiable="ScheduleAnyway")
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("maxSkew")
def skew_of_two(env):
    """maxSkew 2: a zone may hold two more than the emptiest."""
    _constrain(env, maxSkew=2)
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("replicas")
def scales_the_pending_one_away(env):
    """The right constraint, and five replicas, so that none stays Pending."""
    _constrain(env)
    for_env(env).kubectl("scale", "deployment", "shop", "-n", "sched", "--replicas=5")
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("no labelSelector")
def forgets_the_selector(env):
    """A constraint without labelSelector: it counts no Pod, so every zone looks empty."""
    constraint = {k: v for k, v in RIGHT.items() if k != "labelSelector"}
    for_env(env).kubectl("patch", "deployment", "shop", "-n", "sched", "--type=json", "-p", json.dumps(
        [{"op": "add", "path": "/spec/template/spec/topologySpreadConstraints", "value": [constraint]}]))
    write_answer(env, "spread", RIGHT_ANSWER)


@mistake("not right")
def every_node_for_the_spread(env):
    """The right constraint, but the explanation gives the spread reason for zone-c-1 too: the
    Filter plugins stop at the first that fails, NodeResourcesFit before PodTopologySpread."""
    _constrain(env)
    write_answer(env, "spread", {**RIGHT_ANSWER, "nodes": {**RIGHT_ANSWER["nodes"], "zone-c-1": SPREAD}})


@mistake("not right")
def counts_cart_in_zone_a(env):
    """The right constraint, but the explanation counts cart among zone-a's Pods."""
    _constrain(env)
    write_answer(env, "spread", {**RIGHT_ANSWER, "zones": {**RIGHT_ANSWER["zones"], "zone-a": 3}})


@mistake("zone-c-1", "changed")
def relabels_the_small_node(env):
    """Moves zone-c-1 into zone-b with a label, so that the zones look even."""
    _constrain(env)
    for_env(env).kubectl("label", "node", "zone-c-1", "topology.kubernetes.io/zone=zone-b", "--overwrite")
