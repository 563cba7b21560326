"""With report's 1 CPU and 2 GiB: node-1 has 2 of 4 CPUs and 4 of 8 GiB requested (50, 50: 50),
node-2 5 of 8 and 6 of 16 (37, 62: 49), node-3 1 of 16 and 2 of 32 (93, 93: 93). node-3 has the
most room, but its PreferNoSchedule taint costs it TaintToleration's 100 × 3; of node-1 and node-2,
node-1 scores higher in NodeResourcesFit and in BalancedAllocation (its CPU and memory are
equally used)."""

from labkit.exercises import write_answer


def solve(env):
    write_answer(env, "score-predict", {"node": "node-1", "fit": {"node-1": 50, "node-2": 49, "node-3": 93}})
