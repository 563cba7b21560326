"""Reference solution, worked out by hand.

Each node: 8Gi - 1Gi reserved - 2Gi of hugepages = 5Gi allocatable memory.
orders 3Gi -> node 0 (2Gi left). payments 3Gi -> not node 0 any more: node 1 (2Gi left).
reports 4Gi: 2Gi + 2Gi would do, but both nodes already serve single-node allocations, so they
cannot form the group {0,1}: no NUMA placement, rejected. search 2Gi -> fits node 0 again.
"""

import yaml

from labkit.exercises import answer_path

ANSWER = {"admitted": {"orders": True, "payments": True, "reports": False, "search": True},
          "memory": {"orders/app": [0], "payments/app": [1], "search/app": [0]}}


def solve(env):
    path = answer_path(env.lab.id, "memory")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(ANSWER))
