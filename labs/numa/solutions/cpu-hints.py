"""Reference solution, worked out by hand.

lab-two-node: node 0 = CPUs 0-3,8-11, node 1 = CPUs 4-7,12-15; CPU 0 is reserved.
db (6 CPUs) lands on node 0 and takes the whole cores 1, 2, 3 (CPUs 1-3,9-11): node 0 keeps CPU 8.
cache (4 CPUs) does not fit on node 0 any more and takes cores 4, 5 of node 1 (CPUs 4,5,12,13):
node 1 keeps 6,7,14,15. analytics asks for 5: neither node has 5 free CPUs, both together have
exactly 5 -> the only hint is {0,1}; one NUMA node *could* hold 5 CPUs (8 each), so it is not
preferred.
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {"hints": [{"mask": [0, 1], "preferred": False}]}


def solve(env):
    path = answer_path(env.lab.id, "cpu-hints")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
